package fleetsim.cli

import fleetsim.cluster.{ClusterConfig, NodeAgent}
import org.apache.pekko.actor.typed.ActorSystem
import org.apache.pekko.cluster.typed.Cluster

import java.io.PrintStream
import scala.concurrent.Await
import scala.concurrent.duration.*

/** `fleetsim node`: a cluster member that carries devices for runs started with `run --cluster`,
  * until Ctrl-C or SIGTERM (when it hands its blocks over to the other nodes, then leaves).
  */
object NodeCommand:
  val Flags: Seq[Flag] = Seq(Flag.ClusterPort, Flag.ClusterHost, Flag.SeedNodes)

  def apply(args: List[String], out: PrintStream): Int =
    Options.parse("node", Flags, args) match
      case Parsed.Help(text) => out.println(text); 0
      case Parsed.Settings(config) =>
        val clusterConfig = settingsOf("node")(ClusterConfig.node(config))
        val port = config.getInt("fleetsim.cluster.port")
        val system = startMember(Flag.ClusterPort, port)(ActorSystem(NodeAgent(), ClusterConfig.SystemName, clusterConfig))
        val self = Cluster(system).selfMember.address
        val seeds = clusterConfig.getStringList("pekko.cluster.seed-nodes")
        out.println(s"fleetsim: node ${self.host.getOrElse("")}:${self.port.getOrElse(0)} joining ${seeds.toString.stripPrefix("[").stripSuffix("]")}; " +
          s"runs reach it with ./fleetsim run --cluster ${self.host.getOrElse("")}:${self.port.getOrElse(0)}. Ctrl-C hands its devices over and leaves.")
        out.flush()
        Await.result(system.whenTerminated, Duration.Inf)
        0

/** Starts a cluster member; a taken port becomes a one-line error naming the flag that moves it. */
private[cli] def startMember[A](flag: Flag, port: Int)(start: => A): A =
  try start
  catch
    case e: Exception if Iterator.iterate[Throwable](e)(_.getCause).takeWhile(_ != null).exists(_.isInstanceOf[java.net.BindException]) =>
      throw CannotRun(s"the cluster port $port is taken: choose another with --${flag.name}")
