package fleetsim.cli

import fleetsim.CannotRun

import fleetsim.cluster.{ClusterConfig, NodeAgent}
import org.apache.pekko.actor.typed.ActorSystem
import org.apache.pekko.cluster.typed.Cluster
import org.apache.pekko.management.cluster.bootstrap.ClusterBootstrap
import org.apache.pekko.management.scaladsl.PekkoManagement

import java.io.PrintStream
import scala.concurrent.Await
import scala.concurrent.duration.*

/** `fleetsim node`: a cluster member that carries devices for runs started with `run --cluster`,
  * until Ctrl-C or SIGTERM (when it hands its blocks over to the other nodes, then leaves).
  */
object NodeCommand:
  val Flags: Seq[Flag] = Seq(Flag.ClusterPort, Flag.ClusterHost, Flag.SeedNodes, Flag.Discovery, Flag.ManagementPort, Flag.ManagementHost)

  def apply(args: List[String], out: PrintStream): Int =
    Options.parse("node", Flags, args) match
      case Parsed.Help(text) => out.println(text); 0
      case Parsed.Settings(config) =>
        val clusterConfig = settingsOf("node")(ClusterConfig.node(config))
        val port = config.getInt("fleetsim.cluster.port")
        val system = startMember(Flag.ClusterPort, port)(ActorSystem(NodeAgent(), ClusterConfig.SystemName, clusterConfig))
        val self = Cluster(system).selfMember.address
        val address = s"${self.host.getOrElse("")}:${self.port.getOrElse(0)}"
        val seeds = clusterConfig.getStringList("pekko.cluster.seed-nodes")
        val joining =
          if !seeds.isEmpty then s"joining ${seeds.toString.stripPrefix("[").stripSuffix("]")}"
          else bootstrap(system, clusterConfig)
        out.println(s"fleetsim: node $address $joining; runs reach it with ./fleetsim run --cluster $address. Ctrl-C hands its devices over and leaves.")
        out.flush()
        Await.result(system.whenTerminated, Duration.Inf)
        0

  /** Pekko Management on --management-port, and Cluster Bootstrap finding the other nodes through it. */
  private def bootstrap(system: ActorSystem[?], config: com.typesafe.config.Config): String =
    val port = config.getInt("pekko.management.http.port")
    val management =
      try Await.result(PekkoManagement(system).start(), 30.seconds)
      catch
        case e: Exception =>
          system.terminate()
          throw CannotRun(s"Pekko Management cannot listen on port $port (${e.getMessage}): choose another with --${Flag.ManagementPort.name}")
    ClusterBootstrap(system).start()
    val service = config.getString("pekko.management.cluster.bootstrap.contact-point-discovery.service-name")
    s"finding the other nodes of $service by ${config.getString("pekko.discovery.method")} discovery (management on $management)"

/** Starts a cluster member; a taken port becomes a one-line error naming the flag that moves it. */
private[cli] def startMember[A](flag: Flag, port: Int)(start: => A): A =
  try start
  catch
    case e: Exception if Iterator.iterate[Throwable](e)(_.getCause).takeWhile(_ != null).exists(_.isInstanceOf[java.net.BindException]) =>
      throw CannotRun(s"the cluster port $port is taken: choose another with --${flag.name}")
