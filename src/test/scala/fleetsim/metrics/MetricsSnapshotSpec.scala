package fleetsim.metrics

import fleetsim.device.DeviceState
import fleetsim.transport.{FailureReason, MessageKind, Reply}
import io.micrometer.prometheusmetrics.{PrometheusConfig, PrometheusMeterRegistry}
import org.scalatest.funsuite.AnyFunSuite
import org.scalatest.matchers.should.Matchers

/** The figures of several fleets merge into the figures one fleet would have had: counts add up,
  * and percentiles come from the merged times, not from averaging each fleet's percentiles.
  */
class MetricsSnapshotSpec extends AnyFunSuite with Matchers:
  private val kinds = IndexedSeq(MessageKind("heartbeat", 0, periodic = true), MessageKind("stats", 1, periodic = true))
  private val ok = Reply.Response(200, Array.emptyByteArray)

  /** Devices joining and replies with latencies `ms`, to `metrics` and to `all` alike. */
  private def traffic(metrics: FleetMetrics*)(devices: Int, ms: Seq[Int], failures: Int): Unit =
    metrics.foreach { m =>
      (1 to devices).foreach { _ =>
        m.moved(None, DeviceState.Discovering)
        m.moved(Some(DeviceState.Discovering), DeviceState.Reporting)
      }
      ms.foreach { t =>
        m.sent(kinds(0))
        m.replied(kinds(0), ok, t * 1_000_000L)
      }
      (1 to failures).foreach { _ =>
        m.sent(kinds(1))
        m.replied(kinds(1), Reply.Failed(FailureReason.TimedOut), 5_000_000_000L)
      }
      m.tunnelOpened(3_000_000L)
    }

  test("two fleets' snapshots merge into the snapshot of one fleet that saw all their traffic") {
    val (a, b, all) = (FleetMetrics(kinds), FleetMetrics(kinds), FleetMetrics(kinds))
    traffic(a, all)(devices = 30, ms = Seq.fill(980)(2) ++ Seq.fill(20)(400), failures = 3)
    traffic(b, all)(devices = 70, ms = Seq.fill(1000)(5), failures = 0)
    val merged = a.snapshot() + b.snapshot()
    val one = all.snapshot()

    merged.byState(DeviceState.Reporting) shouldBe 100
    merged.byState shouldBe one.byState
    merged.transitions shouldBe one.transitions
    merged.byKind("heartbeat").sent shouldBe 2000
    merged.byKind("stats").failures(FailureReason.TimedOut) shouldBe 3
    merged.byKind.map((k, v) => k -> (v.sent, v.ok, v.failed, v.inFlight)) shouldBe one.byKind.map((k, v) => k -> (v.sent, v.ok, v.failed, v.inFlight))
    merged.tunnels.opened shouldBe 2
    // 20 of the 2,000 replies took 400 ms: the fleet's p99 is 5 ms; averaging the fleets' p99s (400 and 5) would say 202.
    merged.byKind("heartbeat").overall.latency shouldBe one.byKind("heartbeat").overall.latency
    merged.byKind("heartbeat").recent.latency.p99 shouldBe 5.0 +- 0.01
    merged.byKind("heartbeat").recent.latency.max shouldBe 400.0 +- 0.5
  }

  test("a snapshot's recent times are those since the previous one; its overall times are all of them, lateness too, and stay with nothing new") {
    val m = FleetMetrics(kinds)
    traffic(m)(devices = 1, ms = Seq.fill(100)(100), failures = 0)
    (1 to 10).foreach(_ => m.late(kinds(0), 30_000_000L))
    m.snapshot().byKind("heartbeat").recent.count shouldBe 100
    traffic(m)(devices = 0, ms = Seq.fill(50)(1), failures = 0)
    (1 to 5).foreach(_ => m.late(kinds(0), 2_000_000L))
    val second = m.snapshot().byKind("heartbeat")
    second.recent.count shouldBe 50
    second.recent.latency.max shouldBe 1.0 +- 0.01
    second.overall.count shouldBe 150
    second.recentLateness.count shouldBe 5
    second.overallLateness.count shouldBe 15
    second.overallLateness.latency.max shouldBe 30.0 +- 0.05
    val quiet = m.snapshot().byKind("heartbeat") // nothing new: the overall times stay, the recent are none
    (quiet.recent.count, quiet.recentLateness.count) shouldBe (0, 0)
    (quiet.overall.count, quiet.overallLateness.count) shouldBe (150, 15)
    quiet.overall.latency.max shouldBe 100.0 +- 0.1
    traffic(m)(devices = 0, ms = Seq(7), failures = 0)
    val after = m.snapshot().byKind("heartbeat")
    (after.recent.count, after.overall.count) shouldBe (1, 151)
    quiet.overall.count shouldBe 150 // a snapshot handed out does not change
  }

  test("stops are counted by reason, from many threads at once, merge across fleets, and reach Prometheus") {
    val prometheus = PrometheusMeterRegistry(PrometheusConfig.DEFAULT)
    val (a, b) = (FleetMetrics(kinds, prometheus), FleetMetrics(kinds))
    val threads = (1 to 4).map(_ => Thread(() => (1 to 1000).foreach(i => a.halted(if i % 10 == 0 then "checksum: 404 x5" else "join: 403"))))
    threads.foreach(_.start())
    threads.foreach(_.join(10_000))
    b.halted("join: 403")
    a.snapshot().stopped shouldBe Map("join: 403" -> 3600, "checksum: 404 x5" -> 400)
    (a.snapshot() + b.snapshot()).stopped shouldBe Map("join: 403" -> 3601, "checksum: 404 x5" -> 400)
    (a.snapshot().lost + b.snapshot()).stopped shouldBe Map("join: 403" -> 3601, "checksum: 404 x5" -> 400) // a node gone keeps what it counted
    MetricsSnapshot.empty.stopped shouldBe empty
    val scrape = prometheus.scrape()
    scrape should include("""fleetsim_devices_stopped_total{reason="join: 403"} 3600""")
    scrape should include("""fleetsim_devices_stopped_total{reason="checksum: 404 x5"} 400""")
  }

  test("times recorded on many threads while snapshots are taken are each counted once, in the thread's range") {
    val m = FleetMetrics(kinds)
    val (threads, each) = (4, 20_000)
    val recorders = (1 to threads).map(t => Thread(() => (1 to each).foreach(_ => m.replied(kinds(0), ok, t * 1_000_000L))))
    recorders.foreach(_.start())
    var recent = 0L
    while recorders.exists(_.isAlive) do recent += m.snapshot().byKind("heartbeat").recent.count
    recorders.foreach(_.join(10_000))
    val last = m.snapshot().byKind("heartbeat")
    recent + last.recent.count shouldBe threads * each
    last.overall.count shouldBe threads * each
    last.overall.latency.max shouldBe threads.toDouble +- 0.01 // thread t's times are t ms
    last.overall.percentile(100.0 / threads - 1) shouldBe 1.0 +- 0.01
  }

  test("times of very different ranges add up without losing either") {
    val merged = Times.of(1, 2, 3) + Times.of(60_000_000L) + Times.empty
    merged.count shouldBe 4
    merged.latency.max shouldBe 60_000.0 +- 60.0
  }
