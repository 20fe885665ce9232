package fleetsim.cluster

import fleetsim.device.DeviceState.{Discovering, Off, Reporting}
import fleetsim.e2e.Scrape
import fleetsim.metrics.FleetMetrics
import fleetsim.transport.{FailureReason, MessageKind, Reply}
import io.micrometer.prometheusmetrics.{PrometheusConfig, PrometheusMeterRegistry}
import org.scalatest.funsuite.AnyFunSuite

/** A cluster run's `/metrics` carries every series a run in one process does, with the same values,
  * each tagged with its node: one catalogue of meters for both.
  */
class NodeMetersSpec extends AnyFunSuite:
  private val kinds = IndexedSeq(MessageKind("join", 0, periodic = false), MessageKind("heartbeat", 1, periodic = true))

  test("a node's series are the one-process series, tagged with the node, values and latency buckets included") {
    val local = PrometheusMeterRegistry(PrometheusConfig.DEFAULT)
    val metrics = FleetMetrics(kinds, local)
    for _ <- 1 to 3 do metrics.moved(None, Discovering)
    metrics.moved(Some(Discovering), Reporting)
    metrics.moved(Some(Discovering), Off)
    metrics.sent(kinds(0))
    metrics.replied(kinds(0), Reply.Response(200, Array.emptyByteArray), 3_000_000)
    metrics.sent(kinds(1))
    metrics.replied(kinds(1), Reply.Failed(FailureReason.TimedOut), 7_000_000)
    metrics.late(kinds(1), 1_500_000)
    metrics.tunnelOpened(30_000_000)
    metrics.tunnelFailed(FailureReason.AuthRejected)
    metrics.pushed()
    metrics.pushAcknowledged(70_000_000)
    metrics.halted("join: 403")
    val snapshot = metrics.snapshot()

    val cluster = PrometheusMeterRegistry(PrometheusConfig.DEFAULT)
    // Held until scraped: Micrometer's function counters hold what they read weakly, and a collection
    // in between read them as 0 (a run's ClusterDevices holds its own for the run).
    val meters = NodeMeters(cluster, kinds, () => Map("n1" -> snapshot))
    meters.add("n1", snapshot)

    val one = Scrape.parse(local.scrape()).series
    val byNode = Scrape.parse(cluster.scrape()).series
    java.lang.ref.Reference.reachabilityFence(meters)
    // Sums and maxima are of exact times in one process, of µs-rounded ones over the cluster.
    val compared = one.filter((series, _) => !series.contains("_sum") && !series.contains("_max"))
    assert(compared.size > 100, compared.keys)
    for (series, value) <- compared do
      val tagged = Scrape.key(series.takeWhile(_ != '{'), labelsOf(series) + ("node" -> "n1"))
      assert(byNode.get(tagged).contains(value), s"$tagged: ${byNode.get(tagged)} over the cluster, $value in one process")
    assert(byNode.keySet.map(_.takeWhile(_ != '{')) == one.keySet.map(_.takeWhile(_ != '{')))
  }

  private val Label = """([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"""".r
  private def labelsOf(series: String): Map[String, String] = Label.findAllMatchIn(series).map(m => m.group(1) -> m.group(2)).toMap
