package fleetsim.report

import fleetsim.Comparison
import fleetsim.device.DeviceState
import fleetsim.metrics.{FleetMetrics, ProcessFigures}
import fleetsim.transport.{FailureReason, MessageKind, Reply}
import org.scalatest.funsuite.AnyFunSuite

import java.nio.file.Files
import javax.xml.parsers.DocumentBuilderFactory

/** Thresholds as written, checked against the figures a profile's runs have, judged on a summary,
  * and the verdict as the console's table, summary.json and a JUnit XML a real parser reads.
  */
class ThresholdSpec extends AnyFunSuite:
  private val kinds = IndexedSeq(MessageKind("join", 0, periodic = false), MessageKind("heartbeat", 1, periodic = true),
    MessageKind("stats", 2, periodic = true))
  private val figures = Figures(kinds, "test-profile")

  /** 20 devices Reporting; 20 joins in 5 ms; 100 heartbeats, 99 ok in 10 ms and one timed out, each 2 ms late; no stats. */
  private val summary: Summary =
    val metrics = FleetMetrics(kinds)
    (1 to 20).foreach { _ =>
      metrics.moved(None, DeviceState.Discovering)
      metrics.moved(Some(DeviceState.Discovering), DeviceState.Reporting)
      metrics.sent(kinds(0))
      metrics.replied(kinds(0), Reply.Response(200, Array.emptyByteArray), 5_000_000L)
    }
    (1 to 100).foreach { i =>
      metrics.late(kinds(1), 2_000_000L)
      metrics.sent(kinds(1))
      metrics.replied(kinds(1), if i == 100 then Reply.Failed(FailureReason.TimedOut) else Reply.Response(200, Array.emptyByteArray),
        if i == 100 then 5_000_000_000L else 10_000_000L)
    }
    val info = RunInfo("2026-11-25T00:00:00Z", "2026-11-25T00:01:00Z", 60, "duration reached", "http://127.0.0.1:8080", true, "http", "test-profile")
    Summary.of(info, 20, metrics.devicesByState, None, metrics.snapshot(), ProcessFigures(10, 10, 1, 1), None, periodic = Seq("heartbeat", "stats"))

  private def threshold(text: String): Threshold =
    Threshold.parse(text).flatMap(figures.threshold).fold(problem => fail(s"'$text': $problem"), identity)
  private def refusal(text: String): String = Threshold.parse(text).flatMap(figures.threshold).fold(identity, t => fail(s"'$text' accepted: $t"))

  test("a threshold is a figure, a comparison and a bound in the figure's unit, with or without spaces") {
    assert(threshold("latency.heartbeat.p99 < 200ms") == Threshold("latency.heartbeat.p99 < 200ms", figures.byName("latency.heartbeat.p99"),
      Comparison.Below, 200))
    assert(threshold("  errors.rate<=1.5% ").comparison == Comparison.AtMost)
    assert(threshold("errors.rate<=1.5%").bound == 1.5)
    assert(threshold("lateness.heartbeat.max > 1.5s").bound == 1500)
    assert(threshold("messages.heartbeat.failed == 0").comparison == Comparison.Equal)
    assert(threshold("devices.byState.Reporting >= 20").comparison == Comparison.AtLeast)
    assert(threshold("devices.byState.Backoff != 3").comparison == Comparison.NotEqual)
    assert(threshold("latency.join.p90 < 2 s").bound == 2000)
  }

  test("a threshold's syntax is refused saying what to write") {
    assert(Threshold.parse("fast") == Left("'fast' is not a threshold: write a figure, a comparison and a bound, like " +
      "'latency.heartbeat.p99 < 200ms' or 'errors.rate < 1%'"))
    assert(Threshold.parse("errors.rate ~ 1%").left.exists(_.contains("is not a threshold")))
    assert(Threshold.parse("").left.exists(_.contains("is not a threshold")))
    assert(Threshold.parse("errors.rate = 1%") == Left("'errors.rate = 1%': = is not a comparison: use <, <=, >, >=, == or !="))
    assert(Threshold.parse("errors.rate < lots") ==
      Left("'errors.rate < lots': 'lots' is not a bound: write a number with ms, s, % or no unit, like 200ms, 1s, 1% or 10"))
    assert(Threshold.parse("latency.heartbeat.p99 < -5ms").left.exists(_.contains("'-5ms' is not a bound")))
    assert(Threshold.parse("latency.heartbeat.p99 < 5 minutes").left.exists(_.contains("is not a bound")))
  }

  test("an unknown figure is refused with the figure meant, or the figures there are; a bound in the wrong unit with the one to use") {
    assert(refusal("latncy.heartbeat.p99 < 200ms") == "no figure latncy.heartbeat.p99 (did you mean latency.heartbeat.p99?)")
    assert(refusal("errors.rat < 1%") == "no figure errors.rat (did you mean errors.rate?)")
    val listed = refusal("latency.telemetry.p99 < 200ms")
    assert(listed.startsWith("no figure latency.telemetry.p99; the figures of device profile test-profile are " +
      "latency.<kind>.{p50, p90, p99, max} and messages.<kind>.{sent, ok, forbidden, failed} for join, heartbeat, stats; " +
      "lateness.<kind>.{p50, p90, p99, max} for heartbeat, stats; errors.{count, rate}; devices.{target, started}; devices.byState.{"), listed)
    assert(!listed.contains("\n"))
    // join is not sent on a schedule: it has no lateness.
    assert(refusal("lateness.join.p99 < 200ms").startsWith("no figure lateness.join.p99"))
    assert(refusal("errors.rate < 200ms") == "errors.rate is a percentage: give its bound in %, like 1%")
    assert(refusal("latency.heartbeat.p99 < 200") == "latency.heartbeat.p99 is a time: give its bound in ms or s, like 200ms or 1s")
    assert(refusal("messages.heartbeat.failed < 1%") == "messages.heartbeat.failed is a count: give its bound as a plain number, like 10")
  }

  test("every figure named is read from the summary as summary.json has it") {
    def value(name: String) = figures.byName(name).read(summary)
    assert(value("latency.heartbeat.p99") == Right(summary.latencyMs("heartbeat").p99))
    assert(value("latency.heartbeat.p90") == Right(summary.latencyMs("heartbeat").p90))
    assert(value("latency.heartbeat.max") == Right(summary.latencyMs("heartbeat").max))
    assert(value("lateness.heartbeat.p50") == Right(summary.latenessMs("heartbeat").p50))
    assert(math.abs(summary.latenessMs("heartbeat").p50 - 2.0) < 0.01)
    assert(value("messages.heartbeat.sent") == Right(100.0) && value("messages.heartbeat.failed") == Right(1.0))
    assert(value("errors.count") == Right(1.0) && summary.errors == ErrorsSummary(1, 120, 100.0 / 120))
    assert(value("errors.rate") == Right(100.0 / 120))
    assert(value("devices.byState.Reporting") == Right(20.0) && value("devices.target") == Right(20.0))
    assert(summary.latenessMs.keySet == Set("heartbeat", "stats")) // the kinds sent on a schedule
    // Nothing measured is no value, never 0.
    assert(value("latency.stats.p99") == Left("no data: no stats call was answered"))
    assert(value("lateness.stats.p99") == Left("no data: no stats was sent"))
  }

  private val thresholds = Seq("latency.heartbeat.p99 < 0.001ms", "latency.heartbeat.p50 < 1s", "errors.rate < 5%", "errors.count == 1",
    "messages.heartbeat.sent >= 100", "devices.byState.Reporting == 20", "lateness.heartbeat.p99 < 3ms", "lateness.stats.p99 < 100ms")
    .map(threshold)

  test("a verdict passes when every threshold holds, and fails on one that does not or has no value") {
    val verdict = Verdict.judge(thresholds, summary)
    assert(!verdict.passed && verdict.failed == 2)
    assert(verdict.thresholds.map(j => j.threshold -> j.passed) == thresholds.map(_.text).zip(Seq(false, true, true, true, true, true, true, false)))
    val p99 = summary.latencyMs("heartbeat").p99
    assert(verdict.thresholds.head == Judged("latency.heartbeat.p99 < 0.001ms", "latency.heartbeat.p99", Some(p99), "ms", passed = false,
      s"latency.heartbeat.p99 was ${Measure.Time.show(p99)}, not < 0.001 ms"))
    assert(verdict.thresholds.last == Judged("lateness.stats.p99 < 100ms", "lateness.stats.p99", None, "ms", passed = false,
      "lateness.stats.p99: no data: no stats was sent"))
    for (text, holds) <- Seq("errors.count < 1" -> false, "errors.count <= 1" -> true, "errors.count > 1" -> false,
        "errors.count >= 1" -> true, "errors.count == 1" -> true, "errors.count != 1" -> false) do
      assert(Verdict.judge(Seq(threshold(text)), summary).passed == holds, text)
    val passing = Verdict.judge(thresholds.slice(1, 7), summary)
    assert(passing.passed && passing.failed == 0 && passing.thresholds.size == 6)
    assert(Verdict.judged(summary, Nil).verdict.isEmpty)
  }

  test("the verdict is a table in the summary's lines, a field of summary.json, and a table in report.html") {
    val judged = Verdict.judged(summary, thresholds)
    val lines = Summary.render(judged).linesIterator.toList
    val table = lines.dropWhile(!_.startsWith("  verdict:"))
    assert(table.head == "  verdict: FAILED, 2 of 8 thresholds failed")
    def row(result: String, threshold: String, value: String) = s"    $result  ${threshold.padTo(31, ' ')}  $value" // the longest threshold's width
    assert(table(1) == row("FAIL", "latency.heartbeat.p99 < 0.001ms", Measure.Time.show(summary.latencyMs("heartbeat").p99)))
    assert(table(3) == row("pass", "errors.rate < 5%", "0.833%"))
    assert(table(4) == row("pass", "errors.count == 1", "1"))
    assert(table.last == row("FAIL", "lateness.stats.p99 < 100ms", "no data: no stats was sent"))
    assert(table.size == 9)
    assert(!Summary.render(summary).contains("verdict"))

    val dir = Files.createTempDirectory("fleetsim-verdict")
    val read = Summary.read(Summary.write(judged, dir))
    assert(read.verdict == judged.verdict && read.latenessMs == judged.latenessMs && read.errors == judged.errors)
    assert(!Files.readString(Summary.write(summary, dir)).contains("verdict")) // none without thresholds
    Summary.write(judged, dir)
    val page = Files.readString(Report.write(dir))
    assert(page.contains("s.verdict") && page.contains("lateness.stats.p99: no data: no stats was sent"))
  }

  test("verdict.xml is a JUnit report a real XML parser reads: one test case a threshold, a failure each that failed") {
    val judged = Verdict.judged(summary, thresholds)
    val file = VerdictFile.write(judged.verdict.get, judged.run, Files.createTempDirectory("fleetsim-verdict"))
    assert(file.getFileName.toString == "verdict.xml")
    val document = DocumentBuilderFactory.newInstance().newDocumentBuilder().parse(file.toFile)
    val suite = document.getDocumentElement
    assert(suite.getTagName == "testsuite" && suite.getAttribute("name") == "fleetsim")
    assert(suite.getAttribute("tests") == "8" && suite.getAttribute("failures") == "2" && suite.getAttribute("errors") == "0")
    val cases = document.getElementsByTagName("testcase")
    assert(cases.getLength == 8)
    assert((0 until 8).map(i => cases.item(i).getAttributes.getNamedItem("name").getNodeValue) == thresholds.map(_.text))
    val failures = document.getElementsByTagName("failure")
    assert(failures.getLength == 2)
    assert(failures.item(0).getParentNode.getAttributes.getNamedItem("name").getNodeValue == "latency.heartbeat.p99 < 0.001ms")
    assert(failures.item(0).getAttributes.getNamedItem("message").getNodeValue == judged.verdict.get.thresholds.head.message)
    assert(failures.item(1).getTextContent == "lateness.stats.p99: no data: no stats was sent")
    val properties = document.getElementsByTagName("property")
    assert((0 until properties.getLength).exists(i => properties.item(i).getAttributes.getNamedItem("value").getNodeValue == "test-profile"))
  }
