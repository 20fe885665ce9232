package fleetsim.cluster

import fleetsim.metrics.MetricsSnapshot

/** What travels between a cluster's processes, serialized by [[ClusterSerializer]] (Java
  * serialization stays off).
  */
trait ClusterMessage

/** One run as its nodes need it.
  *
  * @param id names the run's sharded blocks, so runs one after another never mix
  * @param config the run's `fleetsim` settings (HOCON), with the controller's or broker's URL filled in
  * @param profileText the device profile file's text, when the run names a file: nodes elsewhere lack it
  * @param startAtMs when device 0 is due (epoch ms); block b is due b × 1,000 / ramp-rate s later
  * @param nodes the device nodes the run was planned for: each leaves room for its share of one lost
  * @param runner the run's own member (its address): when it is gone from the cluster, so is the run
  */
final case class RunPlan(id: String, config: String, profileText: Option[String], startAtMs: Long, devices: Int, nodes: Int, runner: String)

/** A node's answer to a run's plan: None ready, Some(why) it cannot take its share. */
final case class Prepared(node: String, problem: Option[String]) extends ClusterMessage

/** A node's figures for a run: its devices' snapshot (counts and times that add up). */
final case class NodeFigures(node: String, snapshot: MetricsSnapshot) extends ClusterMessage

/** A node has done what it was asked (quiesced or stopped its blocks). */
final case class NodeDone(node: String) extends ClusterMessage
