package fleetsim.e2e

import com.typesafe.config.{Config, ConfigFactory}
import fleetsim.run.{FleetRun, RunSettings}
import fleetsim.device.DeviceState.Reporting
import fleetsim.profile.ProfileLoader
import fleetsim.tls.{CertificateAuthority, Pem}
import org.scalatest.concurrent.Eventually
import org.scalatest.time.{Millis, Seconds, Span}
import org.scalatest.wordspec.AnyWordSpec

import java.nio.file.Files
import scala.concurrent.Await
import scala.concurrent.duration.*

/** MQTT fleets against a real broker: Debian's mosquitto in its own process on 127.0.0.1, with a
  * password file, a TLS listener that requires client certificates, and restarts.
  */
class MosquittoSpec extends AnyWordSpec with Eventually:
  override given patienceConfig: PatienceConfig = PatienceConfig(Span(60, Seconds), Span(100, Millis))

  private val Devices = 200
  private val dir = Files.createTempDirectory("fleetsim-mosquitto")

  private def withBroker(settings: String)(test: Mosquitto => Unit): Unit = Mosquitto.around(dir, settings)(test)

  /** iot-mqtt, reporting every second, with `mqtt` lines added to its mqtt block and `top` before it. */
  private def profile(top: String = "", mqtt: String = ""): String =
    val text = ProfileLoader.builtInText("iot-mqtt").get.replace("interval = 10s", "interval = 1s")
      .replace("mqtt {\n", s"$top\nmqtt {\n$mqtt\n")
    Files.writeString(Files.createTempFile(dir, "profile", ".conf"), text).toString

  private def config(broker: String, profileFile: String, extra: String = ""): Config =
    ConfigFactory.parseString(s"""
      fleetsim.fleet { devices = $Devices, ramp-rate = 1000, transport = mqtt }
      fleetsim.mqtt.broker = "$broker"
      fleetsim.device-profile = "$profileFile"
      fleetsim.http.request-timeout = 3s
      fleetsim.run.results-dir = "${Files.createTempDirectory(dir, "run")}"
      $extra
      """).withFallback(ConfigFactory.load()).resolve()

  "An MQTT fleet against mosquitto" should {
    "log in with each device's own user name and password, and count the one device whose password is wrong" in {
      val csv = Files.createTempFile(dir, "devices", ".csv")
      val users = (0 until Devices).map(n => s"sensor-$n") // a password file's names cannot hold a MAC's colons
      val passwords = Mosquitto.passwordFile(dir, users.zipWithIndex.map((user, n) => user -> s"secret-$n"))
      Files.writeString(csv, "password\n" + (0 until Devices).map(n => if n == 7 then "wrong\n" else s"secret-$n\n").mkString)
      withBroker(s"allow_anonymous false\npassword_file $passwords") { broker =>
        val c = config(s"mqtt://127.0.0.1:${broker.port}",
          profile(top = s"""identity { csv = "$csv" }""", mqtt = "username = \"sensor-{{number}}\"\npassword = \"{{password}}\""))
        withSystem(c) {
          val run = Await.result(FleetRun.start(RunSettings(c)), 30.seconds)
          eventually(assert(run.metrics.devicesByState(Reporting) == Devices - 1, run.metrics.devicesByState))
          eventually(assert(run.metrics.snapshot().tunnels.failures(fleetsim.transport.FailureReason.Unauthorized) >= 2)) // it keeps trying, backing off
          eventually(assert(run.metrics.snapshot().byKind("telemetry").ok >= 2 * (Devices - 1)))
          val summary = Await.result(run.finish("test over"), 60.seconds)
          assert(summary.mqtt.get.connects == Devices - 1 && summary.mqtt.get.connectFailures("unauthorized") >= 2)
          assert(summary.messages("telemetry").failed == 0)
        }
        assert(broker.identities == users.toSet - users(7))
      }
    }

    "present each device's own client certificate over TLS: the broker logs a distinct identity for every device" in {
      val ca = CertificateAuthority.create("mosquitto test CA")
      val tls = Files.createTempDirectory(dir, "tls")
      Pem.write(ca.material, tls.resolve("ca.pem"), Some(tls.resolve("ca.key")))
      Pem.write(ca.issueServer(Seq("127.0.0.1", "localhost")), tls.resolve("server.pem"), Some(tls.resolve("server.key")))
      withBroker(
        s"""allow_anonymous true
           |cafile ${tls.resolve("ca.pem")}
           |certfile ${tls.resolve("server.pem")}
           |keyfile ${tls.resolve("server.key")}
           |require_certificate true
           |use_identity_as_username true""".stripMargin) { broker =>
        val c = config(s"mqtts://127.0.0.1:${broker.port}", profile(),
          s"""fleetsim.tls { ca-file = "${tls.resolve("ca.pem")}", client-ca = "${tls.resolve("ca.pem")}", client-ca-key = "${tls.resolve("ca.key")}" }""")
        withSystem(c) {
          val run = Await.result(FleetRun.start(RunSettings(c)), 30.seconds)
          eventually(assert(run.metrics.devicesByState(Reporting) == Devices, run.metrics.devicesByState))
          Await.result(run.finish("test over"), 60.seconds)
        }
        assert(broker.identities.size == Devices) // CN = the device's client id, its MAC
        assert(broker.identities.contains("02:00:00:00:00:07"))
      }
    }

    "hold at most --max-connects connects open to a broker that does not answer, and connect every device once it does" in
      withBroker("allow_anonymous true") { broker =>
        val limit = 5
        // The fleet calls from an address of its own, so that only its sockets are counted.
        val source = "127.0.7.7"
        val c = config(s"mqtt://127.0.0.1:${broker.port}", profile(), s"fleetsim.mqtt.max-connects = $limit\nfleetsim.http.source-ips = \"$source\"")
        broker.pause() // before the fleet: every connect it takes waits for a CONNACK until it times out (3 s)
        withSystem(c) {
          val run = Await.result(FleetRun.start(RunSettings(c)), 30.seconds)
          val most = java.util.concurrent.atomic.AtomicInteger()
          val sampler = java.util.concurrent.Executors.newSingleThreadScheduledExecutor()
          // Sockets seen open in two listings 20 ms apart, each listing a moment of its own (Mosquitto.clientSockets):
          // a connect whose turn ended and the next one, a millisecond apart, are not counted as open together.
          var last = Set.empty[String]
          sampler.scheduleAtFixedRate(() => {
            val now = broker.clientSockets(source)
            most.accumulateAndGet((last intersect now).size, math.max)
            last = now
          }, 0, 20, java.util.concurrent.TimeUnit.MILLISECONDS)
          // Finished however the test ends: a fleet left running keeps its MQTT event loops in this JVM, where the
          // next suite (MqttEndToEndSpec's thread count) would find them.
          try
            try
              // Two rounds of connects that timed out: the fleet kept trying, a few at a time, all along.
              eventually(assert(run.metrics.snapshot().tunnels.failures(fleetsim.transport.FailureReason.TimedOut) >= 2 * limit))
              assert(most.get == limit, s"at most $limit connects open at once, and that many: saw ${most.get}")
            finally sampler.shutdown()
            broker.resume()
            eventually(assert(run.metrics.devicesByState(Reporting) == Devices, run.metrics.devicesByState))
          finally
            broker.resume()
            Await.result(run.finish("test over"), 60.seconds)
        }
      }

    "come back, every device, spread out, after the broker restarts" in
      withBroker("allow_anonymous true") { broker =>
        val c = config(s"mqtt://127.0.0.1:${broker.port}", profile())
        withSystem(c) {
          val run = Await.result(FleetRun.start(RunSettings(c)), 30.seconds)
          eventually(assert(run.metrics.devicesByState(Reporting) == Devices, run.metrics.devicesByState))
          val recorder = OpensRecorder(() => run.metrics.snapshot().tunnels.opened)
          broker.restart()
          eventually(assert(run.metrics.snapshot().reconnects == Devices))
          eventually(assert(run.metrics.devicesByState(Reporting) == Devices && run.metrics.snapshot().tunnels.opened == 2 * Devices,
            s"${run.metrics.devicesByState} ${run.metrics.snapshot().tunnels}"))
          val busiest = recorder.busiest100ms
          assert(busiest < Devices / 2, s"$busiest of $Devices reconnected within one 100 ms")
          Await.result(run.finish("test over"), 60.seconds)
        }
      }

    "have the broker publish the last will of exactly the devices a power cut or a shrink takes without a word, over MQTT 5 and 3.1.1, and of none that leave cleanly" in
      withBroker("allow_anonymous true") { broker =>
        // A client of the test's own, subscribed to the wills iot-mqtt's devices leave: devices/<id>/status, "offline".
        val watcher = com.hivemq.client.mqtt.MqttClient.builder().useMqttVersion5().identifier("will-watcher")
          .serverHost("127.0.0.1").serverPort(broker.port).buildBlocking()
        watcher.connect()
        val wills = java.util.concurrent.ConcurrentHashMap.newKeySet[String]()
        val marker = "devices/marker/status"
        watcher.toAsync.subscribeWith().topicFilter("devices/+/status").callback(p => wills.add(p.getTopic.toString)).send().get()
        try
          for (version, devices) <- Seq("5" -> 20, "\"3.1.1\"" -> 30) do
            wills.clear()
            val text = Files.readString(java.nio.file.Path.of(profile())).replace("version = 5 ", s"version = $version ")
            val c = config(s"mqtt://127.0.0.1:${broker.port}", Files.writeString(Files.createTempFile(dir, "will", ".conf"), text).toString,
              s"fleetsim.fleet.devices = $devices")
            withSystem(c) {
              val run = Await.result(FleetRun.start(RunSettings(c)), 30.seconds)
              eventually(assert(run.metrics.devicesByState(Reporting) == devices, run.metrics.devicesByState))
              Await.result(run.act(fleetsim.control.RunAction.PowerCut(fleetsim.control.Reach(0, 10, fleetsim.device.Selection.All), 1.hour)), 10.seconds)
              eventually(assert(wills.size == 10, wills)) // each cut device's own, and only those
              assert(run.resize(devices - 5, leave = fleetsim.control.Leave.Cleanly) == Right(devices - 5)) // a DISCONNECT each: no will
              eventually(assert(run.metrics.devicesByState(Reporting) == devices - 15, run.metrics.devicesByState))
              assert(run.resize(devices - 10) == Right(devices - 10)) // they vanish: a will each
              eventually(assert(wills.size == 15, wills))
              Await.result(run.finish("test over"), 60.seconds) // the others say goodbye: no will
            }
            watcher.publishWith().topic(marker).payload("ends".getBytes).send()
            eventually(assert(wills.contains(marker)))
            assert(wills.size == 16, s"MQTT $version: $wills")
        finally watcher.disconnect()
      }
  }
