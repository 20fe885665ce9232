package fleetsim.report

import fleetsim.metrics.{Percentiles, ProcessSample, Rates, Sample, TunnelSample}
import org.scalatest.funsuite.AnyFunSuite

import java.io.{ByteArrayOutputStream, PrintStream}
import java.nio.charset.StandardCharsets.UTF_8

/** The status line a second, as a log or a pipe gets it. */
class ConsoleOutputSpec extends AnyFunSuite:
  private def line(replies: Double, p99: Double, handshakeP99: Double): String =
    val bytes = ByteArrayOutputStream()
    val console = ConsoleOutput(PrintStream(bytes, true, UTF_8), terminal = false, fleetsim.run.MqttKind(None, 1).statusFields)
    console.sample(Sample(0, 1, 10, Map("Reporting" -> 10), Map("telemetry" -> Rates(replies, replies, 0, 0)), 0,
      Map("telemetry" -> Percentiles(p99, p99, p99, p99)), Map.empty, Map.empty,
      Some(TunnelSample(10, 0, 0, 0, handshakeP99)), ProcessSample(40, 1, 0, 0, 100)))
    bytes.toString(UTF_8).trim

  test("a second with replies and connects gives their p99s") {
    val shown = line(replies = 100, p99 = 4.5, handshakeP99 = 230)
    assert(shown.endsWith("10/10 devices | Reporting 10 | 100 msg/s | errors +0 (0 total) | p99 4.5 ms | connections 10 up, 0 connecting, 0 reconnects, connect p99 230 ms"), shown)
  }

  test("a second without replies or connects says '-', not 0 ms") {
    val shown = line(replies = 0, p99 = 0, handshakeP99 = 0)
    assert(shown.contains("| 0 msg/s | errors +0 (0 total) | p99 - |") && shown.endsWith("reconnects, connect p99 -"), shown)
  }
