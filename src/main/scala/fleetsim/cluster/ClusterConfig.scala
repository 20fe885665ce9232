package fleetsim.cluster

import com.typesafe.config.{Config, ConfigFactory, ConfigValueFactory}
import fleetsim.hostPorts

import scala.jdk.CollectionConverters.*

/** The actor system's settings for a cluster member: cluster.conf, this member's address and roles,
  * and where it joins.
  */
object ClusterConfig:
  val SystemName = "fleetsim"

  /** Pekko Discovery methods a node can find the others with (--discovery). */
  val DiscoveryMethods: Seq[String] = Seq("kubernetes-api", "pekko-dns", "config")

  /** A `fleetsim node`: devices, at --cluster-host:--cluster-port, joining --seed-nodes (itself if
    * none), or found by Cluster Bootstrap through --discovery, with Pekko Management on
    * --management-host (the address discovery gives for this node) or else the cluster host.
    */
  def node(config: Config): Config =
    val port = config.getInt("fleetsim.cluster.port")
    val host = config.getString("fleetsim.cluster.host")
    val seeds = hostPorts(config.getString("fleetsim.cluster.seed-nodes"), "--seed-nodes")
    val discovery = config.getString("fleetsim.cluster.discovery")
    if discovery.isEmpty then member(config, host, port, NodeAgent.Role, if seeds.isEmpty then Seq(host -> port) else seeds)
    else
      require(DiscoveryMethods.contains(discovery), s"--discovery must be one of ${DiscoveryMethods.mkString(", ")} (got '$discovery')")
      require(seeds.isEmpty, "--seed-nodes and --discovery both say how to find the other nodes: give one")
      val bootstrap = ConfigFactory.empty
        .withValue("pekko.discovery.method", ConfigValueFactory.fromAnyRef(discovery))
        .withValue("pekko.management.http.hostname", ConfigValueFactory.fromAnyRef(
          Some(config.getString("fleetsim.cluster.management-host")).filter(_.nonEmpty).getOrElse(host)))
        .withValue("pekko.management.http.port", ConfigValueFactory.fromAnyRef(config.getInt("fleetsim.cluster.management-port")))
      val joined = member(bootstrap.withFallback(config), host, port, NodeAgent.Role, Nil)
      if discovery == "config" then
        val service = joined.getString("pekko.management.cluster.bootstrap.contact-point-discovery.service-name")
        require(joined.hasPath(s"pekko.discovery.config.services.\"$service\".endpoints"),
          s"--discovery config needs the nodes' management addresses in a --config file: pekko.discovery.config.services.$service.endpoints = [{ host = \"127.0.0.1\", port = 7626 }, ...]")
      joined

  /** `run --cluster HOST:PORT`: the run's own member, on a free port, with no devices. */
  def runner(config: Config): Config =
    member(config, config.getString("fleetsim.cluster.host"), 0, "run", hostPorts(config.getString("fleetsim.cluster.join"), "--cluster"))

  private def member(config: Config, host: String, port: Int, role: String, seeds: Seq[(String, Int)]): Config =
    ConfigFactory.empty
      .withValue("pekko.remote.artery.canonical.hostname", ConfigValueFactory.fromAnyRef(host))
      .withValue("pekko.remote.artery.canonical.port", ConfigValueFactory.fromAnyRef(port))
      .withValue("pekko.cluster.roles", ConfigValueFactory.fromIterable(Seq(role).asJava))
      .withValue("pekko.cluster.seed-nodes", ConfigValueFactory.fromIterable(seeds.map((h, p) => s"pekko://$SystemName@$h:$p").asJava))
      .withFallback(clusterDefaults(config))
      .withFallback(config)
      .resolve()

  /** cluster.conf's settings, except where the user's own (--config, system properties) say
    * otherwise: they stand above cluster.conf, which stands above the libraries' reference.conf.
    */
  private def clusterDefaults(config: Config): Config =
    val cluster = ConfigFactory.parseResources("fleetsim/cluster.conf").resolve()
    cluster.entrySet.asScala.map(_.getKey).foldLeft(ConfigFactory.empty) { (kept, path) =>
      val theirs = config.hasPath(path) && Option(config.getValue(path).origin.resource).forall(!_.endsWith("reference.conf"))
      if theirs then kept else kept.withValue(path, cluster.getValue(path))
    }
