package fleetsim.e2e

import com.typesafe.config.{Config, ConfigFactory}
import fleetsim.run.{FleetRun, RunSettings}
import fleetsim.device.DeviceState.{Reporting, Stopped}
import fleetsim.profile.ProfileLoader
import fleetsim.report.Summary
import org.scalatest.concurrent.Eventually
import org.scalatest.time.{Millis, Seconds, Span}
import org.scalatest.wordspec.AnyWordSpec

import java.nio.file.{Files, Path}
import scala.concurrent.Await
import scala.concurrent.duration.*

/** The built-in profiles other than ap-v1, each against the reference controller's dialect for it,
  * over real sockets: register, report, follow a config change to applied, and recover from
  * expired credentials and throttling.
  */
class ProfilesEndToEndSpec extends AnyWordSpec with Eventually:
  override given patienceConfig: PatienceConfig = PatienceConfig(Span(60, Seconds), Span(100, Millis))

  private val Devices = 200
  private val dir = Files.createTempDirectory("fleetsim-profiles-e2e")

  /** 200 provisioned tokens, in a CSV as a platform would export them. */
  private val tokens: Path =
    Files.writeString(dir.resolve("tokens.csv"), (0 until Devices).map(i => f"\"tok-$i%05d\",sensor-$i").mkString("token,name\n", "\n", "\n"))

  private def config(profile: String, extra: String = ""): Config =
    ConfigFactory.parseString(s"""
      fleetsim.device-profile = "$profile"
      fleetsim.fleet { devices = $Devices, ramp-rate = 1000, devices-csv = "$tokens" }
      fleetsim.controller { heartbeat-interval = 1s, stats-interval = 2s, iot-tokens = "$tokens" }
      fleetsim.http.request-timeout = 5s # the suite runs beside others: a busy second must not cost a device its registration
      fleetsim.device.backoff { min = 100ms, max = 1s }
      fleetsim.run.results-dir = "${Files.createTempDirectory(dir, Path.of(profile).getFileName.toString)}"
      $extra
      """).withFallback(ConfigFactory.load()).resolve()

  /** Every device Reporting; a config change followed by every device to applied; the summary.
    * No secret is written to the results.
    */
  private def followConfigChange(c: Config): Summary =
    var summary: Summary = null
    withSystem(c) {
      val run = Await.result(FleetRun.start(RunSettings(c)), 30.seconds)
      val controller = run.controller.get
      eventually(assert(run.metrics.devicesByState(Reporting) == Devices))
      eventually(assert(controller.dialectsUpToDate == Devices)) // the first config, applied at start
      controller.registry.bumpConfig()
      eventually(assert(controller.dialectsUpToDate == Devices))
      summary = Await.result(run.finish("test over"), 60.seconds)
      val results = Path.of(c.getString("fleetsim.run.results-dir"))
      for file <- Seq("config.json", "summary.json", "report.html") do
        assert(!Files.readString(results.resolve(file)).contains(c.getString("fleetsim.controller.agent-secret")), file)
    }
    summary

  /** The device's ok calls are the controller's `received`, but for the calls it served after a device's
    * 5 s were up (a very busy machine), which the device counted timed out, and for a reply the device
    * could not use: a config downloaded just after the controller bumped it, whose sha256 is not the
    * checksum the device polled just before (`checkFailed`; the device downloads it again).
    */
  private def agrees(m: fleetsim.report.MessageCounts, received: Long): Unit =
    val unusable = m.failures.getOrElse("timedOut", 0L) + m.failures.getOrElse("checkFailed", 0L)
    assert(m.ok <= received && received <= m.ok + unusable, s"$m, $received received")

  /** What the devices delivered, kind by kind, is what the controller received ([[agrees]]). */
  private def countsAgree(summary: Summary, kinds: String*): Unit =
    assert(summary.messages.keySet == kinds.toSet)
    for kind <- kinds do
      val m = summary.messages(kind)
      withClue(s"$kind: ") {
        assert(m.ok > 0)
        agrees(m, summary.controller.get.received(kind))
        assert(m.sent == m.ok + m.forbidden + m.failed)
      }

  "ap-agent devices" should {
    "register with a signed form, poll the checksum, download and apply a new config, as the controller counts" in {
      val summary = followConfigChange(config("ap-agent"))
      countsAgree(summary, "join", "checksum", "config", "applied")
      assert(summary.messages("join").ok == Devices) // every signature accepted the first time
      assert(summary.messages("applied").ok >= 2 * Devices) // the first config and the new one
      assert(summary.run.deviceProfile == "ap-agent")
    }
    "register again when their keys expire, and carry on" in {
      val c = config("ap-agent", "fleetsim.controller.agent-key-lifetime = 3s")
      withSystem(c) {
        val run = Await.result(FleetRun.start(RunSettings(c)), 30.seconds)
        val controller = run.controller.get
        eventually(assert(controller.counts.received("join") >= 3 * Devices)) // each device at least twice more
        eventually(assert(run.metrics.devicesByState(Reporting) == Devices))
        val summary = Await.result(run.finish("test over"), 60.seconds)
        assert(summary.messages("checksum").failures("unauthorized") >= Devices)
        agrees(summary.messages("join"), controller.counts.received("join"))
      }
    }
  }

  "ap-shell devices" should {
    "register after their boot delay, apply a config only once its sha256 matches, stop when deleted, and come back when restarted" in {
      val c = config("ap-shell")
      withSystem(c) {
        val run = Await.result(FleetRun.start(RunSettings(c)), 30.seconds)
        val controller = run.controller.get
        eventually(assert(run.metrics.devicesByState(Reporting) == Devices))
        eventually(assert(controller.dialectsUpToDate == Devices)) // each archive's sha256 matched the checksum it polled
        // Five devices deleted on the controller: each polls, gets 404 five times, and stops itself.
        val admin = Admin(run.controllerUrl)
        val fleet = fleetsim.fleet.FleetSettings(c)
        val ids = (0 until 5).map { i => val mac = java.lang.StringBuilder(); fleet.appendMac(i, mac); mac.toString.replace(":", "") }
        ids.foreach(id => admin.send("POST", s"/admin/agent/devices/$id/delete"))
        eventually(assert(run.metrics.devicesByState(Stopped) == 5))
        assert(run.metrics.snapshot().stopped == Map("checksum: 404 x5" -> 5))
        // Restarted by the live control API: they boot, register again, and report.
        val restart = java.net.http.HttpClient.newHttpClient().send(
          java.net.http.HttpRequest.newBuilder(java.net.URI.create(run.dashboard.get.url + "api/devices/restart-stopped"))
            .POST(java.net.http.HttpRequest.BodyPublishers.noBody()).build(),
          java.net.http.HttpResponse.BodyHandlers.ofString())
        assert(restart.statusCode == 202 && restart.body == """{"restarting":5}""", restart.body)
        eventually(assert(run.metrics.devicesByState(Reporting) == Devices))
        controller.registry.bumpConfig()
        eventually(assert(controller.dialectsUpToDate == Devices))
        val summary = Await.result(run.finish("test over"), 60.seconds)
        val counts = summary.controller.get
        assert(summary.messages("register").ok == Devices + 5 && counts.received("join") == Devices + 5)
        for kind <- Seq("config", "applied") do withClue(s"$kind: ")(agrees(summary.messages(kind), counts.received(kind)))
        val polls = summary.messages("checksum")
        assert(polls.failures("rejected") == 5 * 5 && counts.refused("checksum") == 5 * 5) // five 404s each, then silence
        agrees(polls, counts.received("checksum"))
        assert(polls.sent == polls.ok + polls.forbidden + polls.failed)
        assert(summary.devices.stopped == Map("checksum: 404 x5" -> 5) && summary.devices.byState("Stopped") == 0)
      }
    }
  }

  "A profile's own timeouts" should {
    "end a call at its own timeout, before the run's, and give the devices the profile's connect timeout" in {
      assert(RunSettings(config("ap-shell")).http.connectTimeout == 10.seconds) // curl --connect-timeout 10
      val agent = ProfileLoader.builtInText("ap-agent").get
      val poll = "    path = \"/agent/devices/{{id}}/checksum\""
      assert(agent.contains(poll))
      val file = Files.writeString(dir.resolve("impatient.conf"), agent.replace(poll, poll + "\n    timeout = 300ms"))
      val c = config(file.toString) // the run's request timeout: 5 s
      withSystem(c) {
        val run = Await.result(FleetRun.start(RunSettings(c)), 30.seconds)
        eventually(assert(run.metrics.devicesByState(Reporting) == Devices))
        Admin(run.controllerUrl).send("PUT", "/admin/faults", """{"latencyMs":1000}""")
        eventually(assert(run.metrics.snapshot().byKind("checksum").failures(fleetsim.transport.FailureReason.TimedOut) >= Devices))
        val summary = Await.result(run.finish("test over"), 60.seconds)
        assert(summary.messages("join").failed == 0) // a second to answer is within the run's 5 s
      }
    }
  }

  "iot-telemetry devices" should {
    "post telemetry with their provisioned tokens, poll attributes and report a new config applied" in {
      val summary = followConfigChange(config("iot-telemetry"))
      countsAgree(summary, "join", "telemetry", "attributes", "applied")
      assert(summary.controller.get.refused.values.sum == 0) // every token provisioned
    }
    "come back after the Retry-After of a throttled controller, and all report again" in {
      val c = config("iot-telemetry")
      withSystem(c) {
        val run = Await.result(FleetRun.start(RunSettings(c)), 30.seconds)
        eventually(assert(run.metrics.devicesByState(Reporting) == Devices))
        val admin = Admin(run.controllerUrl)
        admin.send("PUT", "/admin/faults", """{"throttleRate":0.5,"retryAfterS":2}""")
        eventually(assert(run.metrics.snapshot().byKind("telemetry").failures(fleetsim.transport.FailureReason.Throttled) >= Devices))
        admin.send("PUT", "/admin/faults", """{}""")
        val ok = run.metrics.snapshot().byKind("telemetry").ok
        eventually(assert(run.metrics.snapshot().byKind("telemetry").ok >= ok + 2 * Devices))
        assert(run.metrics.devicesByState(Reporting) == Devices) // a pause is not a failure
        Await.result(run.finish("test over"), 60.seconds)
      }
    }
  }
