package fleetsim.report

import fleetsim.device.DeviceState
import fleetsim.metrics.{FleetMetrics, ProcessFigures}
import fleetsim.transport.{FailureReason, MessageKind, Reply}
import org.scalatest.funsuite.AnyFunSuite

import java.nio.file.Files

/** Devices that stopped themselves, lateness and errors, as summary.json, the summary's lines and report.html give them. */
class SummarySpec extends AnyFunSuite:
  test("stops by reason are under devices in summary.json, in the summary's lines and in report.html") {
    val metrics = FleetMetrics(IndexedSeq(MessageKind("heartbeat", 0, periodic = true)))
    (1 to 3).foreach { _ =>
      metrics.moved(None, DeviceState.Discovering)
      metrics.moved(Some(DeviceState.Discovering), DeviceState.Stopped)
      metrics.halted("join: 403")
    }
    metrics.halted("join: 403") // one of them restarted and stopped again
    metrics.halted("checksum: 404 x5")
    val info = RunInfo("2026-11-25T00:00:00Z", "2026-11-25T00:01:00Z", 60, "duration reached", "http://127.0.0.1:8080", true, "http", "ap-v1")
    val summary = Summary.of(info, 3, metrics.devicesByState, None, metrics.snapshot(), ProcessFigures(10, 10, 1, 1), None)
    assert(summary.devices.byState("Stopped") == 3)
    assert(summary.devices.stopped == Map("checksum: 404 x5" -> 1, "join: 403" -> 4))

    val dir = Files.createTempDirectory("fleetsim-summary")
    val file = Summary.write(summary, dir)
    assert(Files.readString(file).replaceAll("\\s", "").contains(""""stopped":{"checksum:404x5":1,"join:403":4}"""))
    assert(Summary.read(file).devices == summary.devices)
    assert(Summary.render(summary).contains("stopped themselves: 1 for checksum: 404 x5, 4 for join: 403"))
    val page = Files.readString(Report.write(dir))
    assert(page.contains("\"join: 403\"") && page.contains("""id="state-Stopped""""))
  }

  test("lateness over the run is given for the kinds sent on a schedule; errors count failed calls and sessions, over all tried") {
    val kinds = IndexedSeq(MessageKind("join", 0, periodic = false), MessageKind("heartbeat", 1, periodic = true),
      MessageKind("config", 2, periodic = false))
    val metrics = FleetMetrics(kinds)
    (1 to 10).foreach { i =>
      metrics.sent(kinds(1))
      metrics.late(kinds(1), i * 1_000_000L)
      metrics.replied(kinds(1), if i <= 2 then Reply.Response(403, Array.emptyByteArray) else Reply.Response(200, Array.emptyByteArray), 4_000_000L)
    }
    metrics.sent(kinds(0))
    metrics.replied(kinds(0), Reply.Failed(FailureReason.TimedOut), 5_000_000_000L)
    metrics.tunnelOpened(1_000_000L)
    metrics.tunnelFailed(FailureReason.ConnectFailed)
    metrics.snapshot() // lateness over the run is every send's, not the last interval's
    val info = RunInfo("2026-11-25T00:00:00Z", "2026-11-25T00:01:00Z", 60, "duration reached", "http://127.0.0.1:8080", true, "http", "ap-v1")
    val summary = Summary.of(info, 1, metrics.devicesByState, None, metrics.snapshot(), ProcessFigures(10, 10, 1, 1), None,
      periodic = Seq("heartbeat"))
    assert(summary.latenessMs.keySet == Set("heartbeat"))
    val late = summary.latenessMs("heartbeat")
    def near(ms: Double, expected: Double) = math.abs(ms - expected) < 0.02 // HdrHistogram's 3 significant digits
    assert(near(late.p50, 5) && near(late.p90, 9) && near(late.max, 10), late)
    assert(near(summary.latencyMs("heartbeat").p90, 4))
    // Two 403s and a timeout of 11 calls, and a session that failed to open of 2 tried.
    assert(summary.errors == ErrorsSummary(4, 13, 100.0 * 4 / 13))
    assert(Summary.render(summary).contains("errors: 4 of 13 calls and session opens (30.77%)"))
    assert(Summary.render(summary).contains("lateness: heartbeat p50 5.00 ms, p99 "))
    // Why calls failed, by kind; a kind that sent nothing shows no latency rather than 0.00.
    val text = Summary.render(summary)
    assert(text.contains("failed calls: join timedOut 1"), text)
    assert(text.linesIterator.exists(_.trim.split(" +").toSeq == Seq("config", "0", "0", "0", "0", "-", "-", "-")), text)
    // The controller's line names the kinds the fleet sends or it got, and registrations where it keeps any.
    def controllerLine(received: Map[String, Long], registered: Int) =
      val counts = fleetsim.metrics.ControllerCounts(registered, 0, 1, received, Map.empty, Map.empty, Map.empty, 0, 0, 0, 0)
      Summary.render(summary.copy(controller = Some(counts))).linesIterator.find(_.contains("controller received")).get.trim
    assert(controllerLine(Map("join" -> 0L, "stats" -> 0L, "telemetry" -> 687L), 0) == "controller received: join 0, telemetry 687")
    assert(controllerLine(Map("join" -> 5L, "heartbeat" -> 20L, "stats" -> 0L, "config" -> 0L), 5) ==
      "controller received: join 5, heartbeat 20, config 0; 5 registered")
    val dir = Files.createTempDirectory("fleetsim-summary")
    assert(Summary.read(Summary.write(summary, dir)) == summary)
  }

  test("a kind whose calls were all interrupted shows no latency, and says why they failed") {
    val kinds = IndexedSeq(MessageKind("heartbeat", 0, periodic = true))
    val metrics = FleetMetrics(kinds)
    metrics.sent(kinds(0)) // never answered: the run did not wait for it
    val info = RunInfo("2026-11-25T00:00:00Z", "2026-11-25T00:01:00Z", 60, "interrupted", "http://127.0.0.1:8080", true, "http", "ap-v1")
    val text = Summary.render(Summary.of(info, 1, metrics.devicesByState, None, metrics.snapshot(), ProcessFigures(10, 10, 1, 1), None))
    assert(text.linesIterator.exists(_.trim.split(" +").toSeq == Seq("heartbeat", "1", "0", "0", "1", "-", "-", "-")), text)
    assert(text.contains("failed calls: heartbeat interrupted 1"), text)
  }
