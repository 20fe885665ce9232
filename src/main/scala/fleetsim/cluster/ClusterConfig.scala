package fleetsim.cluster

import com.typesafe.config.{Config, ConfigFactory, ConfigValueFactory}
import fleetsim.hostPort

import scala.jdk.CollectionConverters.*

/** The actor system's settings for a cluster member: cluster.conf, this member's address and roles,
  * and where it joins.
  */
object ClusterConfig:
  val SystemName = "fleetsim"

  /** A `fleetsim node`: devices, at --cluster-host:--cluster-port, joining --seed-nodes (itself if none). */
  def node(config: Config): Config =
    val port = config.getInt("fleetsim.cluster.port")
    val host = config.getString("fleetsim.cluster.host")
    val seeds = seedNodes(config.getString("fleetsim.cluster.seed-nodes"), "--seed-nodes")
    member(config, host, port, NodeAgent.Role, if seeds.isEmpty then Seq(host -> port) else seeds)

  /** `run --cluster HOST:PORT`: the run's own member, on a free port, with no devices. */
  def runner(config: Config): Config =
    member(config, config.getString("fleetsim.cluster.host"), 0, "run", seedNodes(config.getString("fleetsim.cluster.join"), "--cluster"))

  private def member(config: Config, host: String, port: Int, role: String, seeds: Seq[(String, Int)]): Config =
    ConfigFactory.empty
      .withValue("pekko.remote.artery.canonical.hostname", ConfigValueFactory.fromAnyRef(host))
      .withValue("pekko.remote.artery.canonical.port", ConfigValueFactory.fromAnyRef(port))
      .withValue("pekko.cluster.roles", ConfigValueFactory.fromIterable(Seq(role).asJava))
      .withValue("pekko.cluster.seed-nodes", ConfigValueFactory.fromIterable(seeds.map((h, p) => s"pekko://$SystemName@$h:$p").asJava))
      .withFallback(ConfigFactory.parseResources("fleetsim/cluster.conf"))
      .withFallback(config)
      .resolve()

  /** HOST:PORT,HOST:PORT */
  def seedNodes(text: String, flag: String): Seq[(String, Int)] =
    text.split(',').map(_.trim).filter(_.nonEmpty).toSeq.map(hostPort(_, flag))
