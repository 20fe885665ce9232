package fleetsim.e2e

import com.typesafe.config.{Config, ConfigFactory}
import fleetsim.run.{FleetRun, RunSettings}
import fleetsim.device.DeviceState.Reporting
import org.apache.pekko.actor.typed.{ActorSystem, SpawnProtocol}
import org.scalatest.concurrent.Eventually
import org.scalatest.time.{Millis, Seconds, Span}
import org.scalatest.wordspec.AnyWordSpec

import java.net.URI
import java.net.http.{HttpClient, HttpRequest, HttpResponse}
import java.nio.file.Files
import scala.concurrent.Await
import scala.concurrent.duration.*
import scala.jdk.CollectionConverters.*

/** MQTT fleets against the broker embedded with the reference controller, over real sockets. */
class MqttEndToEndSpec extends AnyWordSpec with Eventually:
  override given patienceConfig: PatienceConfig = PatienceConfig(Span(60, Seconds), Span(100, Millis))

  private val Devices = 200
  private val dir = Files.createTempDirectory("fleetsim-mqtt-e2e")

  private def config(extra: String = ""): Config =
    ConfigFactory.parseString(s"""
      fleetsim.fleet { devices = $Devices, ramp-rate = 1000, transport = mqtt }
      fleetsim.controller.state-dir = "${Files.createTempDirectory(dir, "state")}"
      fleetsim.http.request-timeout = 3s
      fleetsim.device.backoff { min = 100ms, max = 1s }
      fleetsim.run.results-dir = "${Files.createTempDirectory(dir, "run")}"
      $extra
      """).withFallback(ConfigFactory.load()).resolve()

  /** A profile file like iot-mqtt, reporting every second. */
  private def quickProfile: String =
    val text = fleetsim.profile.ProfileLoader.builtInText("iot-mqtt").get.replace("interval = 10s", "interval = 1s")
    val file = Files.createTempFile(dir, "quick", ".conf")
    Files.writeString(file, text)
    file.toString

  private def post(url: String): String =
    HttpClient.newHttpClient().send(HttpRequest.newBuilder(URI(url)).POST(HttpRequest.BodyPublishers.noBody()).build(),
      HttpResponse.BodyHandlers.ofString()).body()

  /** Pushes config 2 on the fleet's topic and waits until every device has acknowledged it. */
  private def pushedToFleet(run: FleetRun): fleetsim.controller.Controller =
    val controller = run.controller.get
    val reply = post(s"${controller.url}/admin/config/push?to=fleet")
    assert(reply.contains("\"configSeq\":2"), reply)
    eventually(assert(run.metrics.snapshot().pushes.acknowledged == Devices))
    controller

  "An MQTT fleet against the embedded broker" should {
    "bring every device to Reporting, the controller receiving what the devices delivered" in {
      val c = config(s"""fleetsim.device-profile = "$quickProfile"""")
      withSystem(c) {
        val run = Await.result(FleetRun.start(RunSettings(c)), 30.seconds)
        assert(run.controllerUrl.startsWith("mqtt://127.0.0.1:"))
        eventually(assert(run.metrics.devicesByState(Reporting) == Devices, run.metrics.devicesByState))
        eventually(assert(run.metrics.snapshot().byKind("telemetry").ok >= 2 * Devices))
        val summary = Await.result(run.finish("test over"), 60.seconds)
        val telemetry = summary.messages("telemetry")
        assert(telemetry.failed == 0)
        assert(telemetry.ok == summary.controller.get.received("telemetry")) // received == delivered
        val mqtt = summary.mqtt.get
        assert(mqtt.connects == Devices && mqtt.connectedAtEnd == Devices && mqtt.reconnects == 0)
        assert(summary.run.transport == "mqtt" && summary.run.deviceProfile.nonEmpty)
      }
    }

    "speak MQTT 3.1.1 as well, with a last will, when the profile says so" in {
      val text = fleetsim.profile.ProfileLoader.builtInText("iot-mqtt").get.replace("interval = 10s", "interval = 1s")
        .replace("version = 5 ", "version = \"3.1.1\" ")
      assert(text.contains("version = \"3.1.1\""))
      val file = Files.writeString(Files.createTempFile(dir, "v3", ".conf"), text)
      val c = config(s"""fleetsim.device-profile = "$file"
        fleetsim.fleet.devices = 50""")
      withSystem(c) {
        val run = Await.result(FleetRun.start(RunSettings(c)), 30.seconds)
        assert(RunSettings(c).profile.mqtt.get.version == 3)
        eventually(assert(run.metrics.devicesByState(Reporting) == 50, run.metrics.devicesByState))
        eventually(assert(run.metrics.snapshot().byKind("telemetry").ok >= 100))
        val summary = Await.result(run.finish("test over"), 60.seconds)
        assert(summary.messages("telemetry").ok == summary.controller.get.received("telemetry"))
      }
    }

    "push a config to every device, each acknowledging it, and time push to acknowledgement" in {
      val c = config()
      withSystem(c) {
        val run = Await.result(FleetRun.start(RunSettings(c)), 30.seconds)
        eventually(assert(run.metrics.devicesByState(Reporting) == Devices, run.metrics.devicesByState))
        val controller = pushedToFleet(run)
        eventually(assert(controller.counts.received("applied") == Devices))
        val each = post(s"${controller.url}/admin/config/push?to=each")
        assert(each.contains(s"\"messages\":$Devices"), each)
        eventually(assert(controller.counts.received("applied") == 2 * Devices))
        // The controller reads each "applied" before its PUBACK reaches the device: wait for the devices to count it too.
        eventually(assert(run.metrics.snapshot().pushes.acknowledged == 2 * Devices))
        val summary = Await.result(run.finish("test over"), 60.seconds)
        val pushes = summary.pushes.get
        assert(pushes.received >= 2 * Devices && pushes.acknowledged == 2 * Devices)
        assert(pushes.pushToAckMs.p50 > 0 && pushes.pushToAckMs.max >= pushes.pushToAckMs.p50)
        assert(summary.messages("applied").ok == 2 * Devices)
      }
    }

    "bring a device that connects after a push up to date: the push is retained" in {
      val c = config("fleetsim.fleet.ramp-rate = 50") // 4 s of ramp: most devices connect after the push
      withSystem(c) {
        val run = Await.result(FleetRun.start(RunSettings(c)), 30.seconds)
        eventually(assert(run.metrics.snapshot().tunnels.opened > 0))
        val controller = run.controller.get
        assert(post(s"${controller.url}/admin/config/push?to=fleet").contains("\"configSeq\":2"))
        val connected = run.metrics.snapshot().tunnels.opened
        assert(connected < Devices / 2, s"$connected of $Devices connected at the push")
        eventually(assert(controller.counts.received("applied") == Devices))
        eventually(assert(run.metrics.snapshot().pushes.acknowledged == Devices))
        val summary = Await.result(run.finish("test over"), 60.seconds)
        assert(summary.messages("applied").ok == Devices && summary.pushes.get.acknowledged == Devices)
      }
    }

    "fetch over HTTP the document a push names, then acknowledge it" in {
      val profile = Files.writeString(Files.createTempFile(dir, "fetch", ".conf"), """
        name = "iot-mqtt-fetch"
        transport = mqtt
        messages.telemetry { interval = 10s, topic = "devices/{{clientId}}/telemetry", json = "{\"seq\":{{seq}}}" }
        pushes {
          topics = ["fleet/config"]
          keep {
            configSeq { json = "/configSeq", default = 0 }
            configUrl { json = "/url", type = text, default = "" }
          }
        }
        triggers.config {
          when { newer = configSeq, than = appliedConfigSeq }
          calls = [
            { name = fetch, url = "{{configUrl}}", keep { fetchedSeq { json = "/configSeq", default = 0 } } }
            { name = applied, topic = "devices/{{clientId}}/applied", json = "{\"configSeq\":{{fetchedSeq}}}" }
          ]
        }
        """)
      val c = config(s"""fleetsim.device-profile = "$profile"""")
      withSystem(c) {
        val run = Await.result(FleetRun.start(RunSettings(c)), 30.seconds)
        eventually(assert(run.metrics.devicesByState(Reporting) == Devices, run.metrics.devicesByState))
        val controller = pushedToFleet(run)
        assert(controller.counts.received("config") == Devices) // each device fetched the document once, over HTTP
        eventually(assert(controller.counts.received("applied") == Devices))
        val summary = Await.result(run.finish("test over"), 60.seconds)
        assert(summary.messages("fetch").ok == Devices && summary.messages("fetch").failed == 0)
        assert(summary.messages("applied").ok == Devices)
      }
    }

    "reconnect every device, spread out, when the broker drops all sessions at once" in {
      val c = config(s"""fleetsim.device-profile = "$quickProfile"
        fleetsim.device.backoff { min = 1s, max = 4s }""")
      withSystem(c) {
        val run = Await.result(FleetRun.start(RunSettings(c)), 30.seconds)
        eventually(assert(run.metrics.devicesByState(Reporting) == Devices, run.metrics.devicesByState))
        val recorder = OpensRecorder(() => run.metrics.snapshot().tunnels.opened)
        assert(post(s"${run.controller.get.url}/admin/mqtt/drop").contains(s"\"sessions\":$Devices"))
        eventually(assert(run.metrics.snapshot().reconnects == Devices))
        eventually(assert(run.metrics.devicesByState(Reporting) == Devices && run.metrics.snapshot().tunnels.opened == 2 * Devices,
          s"${run.metrics.devicesByState} ${run.metrics.snapshot().tunnels}"))
        val busiest = recorder.busiest100ms
        assert(busiest < Devices / 2, s"$busiest of $Devices reconnected within one 100 ms")
        val summary = Await.result(run.finish("test over"), 60.seconds)
        assert(summary.mqtt.get.reconnects == Devices)
        // A publish the broker took just as it dropped the session lost its PUBACK: the device counts it failed.
        val (telemetry, received) = (summary.messages("telemetry"), summary.controller.get.received("telemetry"))
        assert(telemetry.ok <= received && received <= telemetry.ok + telemetry.failed, s"$telemetry, controller received $received")
      }
    }

    "hold its thread count flat from 50 devices to 2,000" in {
      def threadsAt(devices: Int): Threads =
        // Pekko's blocking-io pool starts a thread for each task until it has its fixed 16, however
        // idle the others: bounded, but it would read as growth. Held at 4, what is left is ours.
        val c = config(s"""fleetsim.fleet.devices = $devices
          fleetsim.fleet.ramp-rate = 2000
          fleetsim.device-profile = "$quickProfile"
          pekko.actor.default-blocking-io-dispatcher.thread-pool-executor.fixed-pool-size = 4""")
        var threads: Threads = null
        withSystem(c) {
          val run = Await.result(FleetRun.start(RunSettings(c)), 30.seconds)
          eventually(assert(run.metrics.devicesByState(Reporting) == devices, run.metrics.devicesByState))
          eventually(assert(run.metrics.snapshot().byKind("telemetry").ok >= 2 * devices)) // in steady state: every device has published
          threads = Threads(summon[ActorSystem[?]])
          Await.result(run.finish("test over"), 60.seconds)
        }
        // The next count starts clean: this run's event loops end a moment after its sessions closed.
        eventually(assert(!Thread.getAllStackTraces.keySet.asScala.exists(_.getName.startsWith("fleetsim-mqtt-io"))))
        threads
      val (few, many) = (threadsAt(50), threadsAt(2000))
      assert(many.overCeilings.isEmpty, many.overCeilings)
      val grew = many.othersByName.filter((n, c) => c > few.othersByName.getOrElse(n, 0))
      assert(many.others <= few.others + 4, s"${few.others} threads at 50 devices, ${many.others} at 2,000; more of: $grew")
      // Up to 10,000 publishes a second, their sessions share one event loop: a second would wake as often for no more work.
      assert(many.othersByName.get("fleetsim-mqtt-io-#").contains(1), many.othersByName)
    }
  }

/** What the spread of reconnections looked like: opens counted every 20 ms by a timer, never a sleep. */
final class OpensRecorder(opened: () => Long):
  private val counts = java.util.concurrent.ConcurrentLinkedQueue[(Long, Long)]()
  private val timer = java.util.concurrent.Executors.newSingleThreadScheduledExecutor()
  timer.scheduleAtFixedRate(() => counts.add(System.nanoTime() -> opened()), 0, 20, java.util.concurrent.TimeUnit.MILLISECONDS)

  /** The most opens seen within any 100 ms. */
  def busiest100ms: Long =
    timer.shutdown()
    val seen = counts.toArray(Array.empty[(Long, Long)]).toIndexedSeq
    seen.map((t, n) => seen.filter((u, _) => u >= t && u - t <= 100_000_000L).map(_._2).max - n).maxOption.getOrElse(0L)
