package fleetsim.report

import fleetsim.device.DeviceState
import fleetsim.metrics.{FleetMetrics, ProcessFigures}
import fleetsim.transport.MessageKind
import org.scalatest.funsuite.AnyFunSuite

import java.nio.file.Files

/** Devices that stopped themselves, as summary.json, the summary's lines and report.html give them. */
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
