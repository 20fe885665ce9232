package fleetsim.e2e

import com.github.plokhotnyuk.jsoniter_scala.core.readFromString
import com.typesafe.config.{Config, ConfigFactory}
import fleetsim.run.{FleetRun, RunSettings}
import fleetsim.controller.ControllerRoutes.{DeviceView, given}
import fleetsim.controller.{Controller, ControllerSettings}
import fleetsim.device.DeviceState.*
import fleetsim.protocol.{ApiCall, HeartbeatReply}
import fleetsim.report.Summary
import fleetsim.transport.FailureReason
import org.apache.pekko.actor.typed.{ActorSystem, SpawnProtocol}
import org.scalatest.concurrent.Eventually
import org.scalatest.time.{Millis, Seconds, Span}
import org.scalatest.wordspec.AnyWordSpec

import java.net.URI
import java.nio.file.Files
import java.time.Instant
import java.time.temporal.ChronoUnit
import java.net.http.{HttpClient, HttpRequest, HttpResponse}
import scala.concurrent.Await
import scala.concurrent.duration.*

/** Real fleets against the real reference controller over real sockets on 127.0.0.1, port 0. */
class FleetEndToEndSpec extends AnyWordSpec with Eventually:
  override given patienceConfig: PatienceConfig = PatienceConfig(Span(45, Seconds), Span(100, Millis))

  private val Devices = 200

  private def config(extra: String = ""): Config =
    ConfigFactory.parseString(s"""
      fleetsim.fleet { devices = $Devices, ramp-rate = 1000 }
      fleetsim.controller { heartbeat-interval = 1s, stats-interval = 2s }
      fleetsim.http.request-timeout = 2s
      fleetsim.device.backoff { min = 100ms, max = 1s }
      fleetsim.run.results-dir = "${Files.createTempDirectory("fleetsim-e2e")}"
      $extra
      """).withFallback(ConfigFactory.load()).resolve()

  /** A fleet, its system and an admin client, cleaned up whatever the test does. */
  private def withFleet(c: Config)(test: (FleetRun, Admin) => Unit)(using system: ActorSystem[SpawnProtocol.Command]): Unit =
    val run = Await.result(FleetRun.start(RunSettings(c)), 30.seconds)
    try test(run, Admin(run.controllerUrl))
    finally Await.result(run.finish("test over"), 60.seconds)


  private def reporting(run: FleetRun): Long = run.metrics.devicesByState(Reporting)

  private def allReporting(run: FleetRun): Unit = eventually(assert(reporting(run) == Devices))

  "A fleet against the reference controller" should {
    "bring every device to Reporting, and the controller received exactly what the devices delivered" in {
      val c = config()
      withSystem(c) {
        val run = Await.result(FleetRun.start(RunSettings(c)), 30.seconds)
        allReporting(run)
        val start = run.metrics.snapshot().byKind(ApiCall.Heartbeat.key).ok
        eventually(assert(run.metrics.snapshot().byKind(ApiCall.Heartbeat.key).ok >= start + 2 * Devices))
        val summary = Await.result(run.finish("test over"), 60.seconds)
        assert(summary.devices.byState("Reporting") == Devices)
        val received = summary.controller.get.received
        for kind <- ApiCall.values.map(_.key) do
          val m = summary.messages(kind)
          withClue(s"$kind: ") {
            assert(m.ok > 0)
            assert(m.ok == received(kind))
            assert(m.sent == m.ok + m.forbidden + m.failed)
            assert(m.failed == 0)
          }
        assert(summary.messages("stats").ok >= 3 * Devices)
      }
    }

    "bring every device to a bumped config version" in {
      val c = config()
      withSystem(c) {
        withFleet(c) { (run, admin) =>
          allReporting(run)
          val seq = readFromString[HeartbeatReply](admin.send("POST", "/admin/config/bump")).configSeq
          assert(seq == 2)
          eventually {
            val devices = admin.devices()
            assert(devices.size == Devices)
            assert(devices.forall(_.configSeq == seq))
          }
          assert(run.metrics.snapshot().byKind(ApiCall.Config.key).ok >= 2 * Devices)
        }
      }
    }

    "send a forbidden device back to Discovering, and let it rejoin when allowed again" in {
      val c = config()
      withSystem(c) {
        withFleet(c) { (run, admin) =>
          allReporting(run)
          val mac = run.settings.fleet.mac(7)
          admin.send("POST", s"/admin/devices/$mac/forbid")
          eventually {
            assert(run.metrics.devicesByState(Discovering) == 1)
            assert(reporting(run) == Devices - 1)
          }
          assert(!admin.devices().exists(_.mac == mac))
          val allowedAt = Instant.now.truncatedTo(ChronoUnit.MILLIS)
          admin.send("POST", s"/admin/devices/$mac/allow")
          allReporting(run)
          val row = eventually(admin.devices().find(d => d.mac == mac && d.state == "Reporting").get)
          assert((row.serial, row.model, row.firmware) == ("FS0000000007", "FS-AP-100", "1.0.0")) // as ap-v1 joined
          assert(!Instant.parse(row.lastSeen).isBefore(allowedAt))
          assert(run.controller.get.registry.counts.refused("join") >= 1)
        }
      }
    }

    "recover every device, without restarting the fleet, after the controller stops and comes back" in {
      val base = config()
      withSystem(base) {
        val port = freePort() // restarted on it: a port no other suite's port 0 can take meanwhile
        val settings = ControllerSettings(base).copy(port = port)
        val first = Await.result(Controller.start(settings), 10.seconds)
        withFleet(config(s"""fleetsim.controller.url = "${first.url}"""")) { (run, _) =>
          allReporting(run)
          Await.result(first.stop(), 10.seconds)
          eventually(assert(reporting(run) == 0 && run.metrics.devicesByState(Backoff) > 0))
          val second = Await.result(Controller.start(settings, first.registry), 10.seconds)
          try
            allReporting(run)
            assert(run.metrics.snapshot().byKind(ApiCall.Heartbeat.key).failures(FailureReason.ConnectFailed) > 0)
          finally Await.result(second.stop(), 10.seconds)
        }
      }
    }

    "fail slow calls as timedOut and calls past the connections' room as overloaded, then recover" in {
      val c = config("fleetsim.http { max-connections = 1, pipelining = 8 }")
      withSystem(c) {
        withFleet(c) { (run, admin) =>
          allReporting(run)
          admin.send("PUT", "/admin/faults", """{"latencyMs":3000}""") // past the 2 s request timeout
          def failures(reason: FailureReason) = run.metrics.snapshot().byKind.values.map(_.failures(reason)).sum
          eventually(assert(failures(FailureReason.TimedOut) > 0 && failures(FailureReason.Overloaded) > 0))
          admin.send("PUT", "/admin/faults", """{"latencyMs":0}""")
          allReporting(run)
          val heartbeats = run.metrics.snapshot().byKind(ApiCall.Heartbeat.key).ok
          eventually(assert(run.metrics.snapshot().byKind(ApiCall.Heartbeat.key).ok >= heartbeats + Devices))
        }
      }
    }

    "keep every device up under a 20% error rate, and count every error" in {
      val c = config()
      withSystem(c) {
        val run = Await.result(FleetRun.start(RunSettings(c)), 30.seconds)
        val admin = Admin(run.controllerUrl)
        allReporting(run)
        admin.send("PUT", "/admin/faults", """{"errorRate":0.2}""")
        eventually(assert(run.metrics.snapshot().byKind(ApiCall.Heartbeat.key).failed >= Devices / 2))
        val summary = Await.result(run.finish("test over"), 60.seconds)
        val controller = summary.controller.get
        assert(summary.devices.byState.values.sum == Devices)
        assert(summary.devices.byState("Reporting") > Devices / 2)
        for kind <- Seq("heartbeat", "stats") do
          val m = summary.messages(kind)
          withClue(s"$kind: ") {
            assert(m.failures("rejected") > 0)
            assert(m.failures("rejected") == controller.injectedErrors(kind))
            assert(m.ok == controller.received(kind))
            assert(m.sent == m.ok + m.forbidden + m.failed)
          }
      }
    }
  }

/** The controller's admin API, over a real socket. */
final class Admin(base: String):
  private val client = HttpClient.newBuilder().connectTimeout(java.time.Duration.ofSeconds(5)).build()

  def send(method: String, path: String, json: String = ""): String =
    val request = HttpRequest.newBuilder(URI.create(base + path))
      .timeout(java.time.Duration.ofSeconds(10))
      .method(method, if json.isEmpty then HttpRequest.BodyPublishers.noBody() else HttpRequest.BodyPublishers.ofString(json))
      .header("Content-Type", "application/json")
      .build()
    val response = client.send(request, HttpResponse.BodyHandlers.ofString())
    assert(response.statusCode / 100 == 2, s"$method $path answered ${response.statusCode}: ${response.body}")
    response.body

  def devices(): List[DeviceView] = readFromString[List[DeviceView]](send("GET", "/admin/devices?limit=100000"))

  def counts(): fleetsim.metrics.ControllerCounts = readFromString[fleetsim.metrics.ControllerCounts](send("GET", "/admin/counts"))
