package fleetsim.e2e

import com.typesafe.config.{Config, ConfigFactory}
import fleetsim.run.{FleetRun, RunSettings}
import fleetsim.device.DeviceState.Reporting
import fleetsim.transport.{ConnectionMode, Dialer, HttpSettings, HttpTransport, MessageKind, Reply, Request}
import org.scalatest.concurrent.Eventually
import org.scalatest.time.{Millis, Seconds, Span}
import org.scalatest.wordspec.AnyWordSpec

import java.nio.file.Files
import scala.concurrent.{Await, Future, Promise}
import scala.concurrent.duration.*

/** How devices share connections, and where they call from, as the reference controller sees it
  * over real sockets.
  */
class ConnectionsEndToEndSpec extends AnyWordSpec with Eventually:
  override given patienceConfig: PatienceConfig = PatienceConfig(Span(60, Seconds), Span(100, Millis))

  private val Devices = 200
  private val dir = Files.createTempDirectory("fleetsim-connections-e2e")

  private def config(extra: String): Config =
    ConfigFactory.parseString(s"""
      fleetsim.fleet { devices = $Devices, ramp-rate = 1000 }
      fleetsim.controller { heartbeat-interval = 1s, stats-interval = 2s }
      fleetsim.http.request-timeout = 2s
      fleetsim.device.backoff { min = 100ms, max = 1s }
      fleetsim.run.results-dir = "${Files.createTempDirectory(dir, "run")}"
      $extra
      """).withFallback(ConfigFactory.load()).resolve()

  /** A copy of ap-v1 that says how its devices use connections. */
  private def apV1With(connection: String): String =
    val text = fleetsim.profile.ProfileLoader.builtInText("ap-v1").get
    Files.writeString(dir.resolve(s"ap-v1-$connection.conf"), s"$text\nconnection = $connection\n").toString

  "--source-ips" should {
    "send each device from its own stable address of the block" in {
      val c = config("""fleetsim.http.source-ips = "127.0.1.0/28" """)
      val settings = RunSettings(c)
      assert(settings.connection == ConnectionMode.PerDevice) // an address is an identity: no sharing
      withSystem(c) {
        val run = Await.result(FleetRun.start(settings), 30.seconds)
        val admin = Admin(run.controllerUrl)
        eventually(assert(run.metrics.devicesByState(Reporting) == Devices))
        // Two heartbeats each after join, so a device that moved would have shown it.
        eventually(assert(run.controller.get.counts.received("heartbeat") >= 2L * Devices))
        val rows = admin.devices()
        assert(rows.size == Devices)
        assert(rows.map(_.address).toSet == (0 until 16).map(i => s"127.0.1.$i").toSet)
        for row <- rows do
          val number = (java.lang.Long.parseLong(row.mac.replace(":", ""), 16) - settings.fleet.macBase).toInt
          assert(row.address == s"127.0.1.${number % 16}", row.mac)
        assert(run.controller.get.counts.addressChanges == 0)
        Await.result(run.finish("test over"), 60.seconds)
      }
    }
  }

  "connection = shared" should {
    "crowd the calls onto as few of its connections as they need, not spread them over all it may open" in {
      // 200 devices, each with two calls in flight at most (a heartbeat and its stats): 32 calls on a
      // connection before the next is used, so at most 13 of the 64 allowed, even on a machine so busy
      // that every device waits at once; on an idle one, one or two.
      val c = config(s"""fleetsim.device-profile = "${apV1With("shared")}"
        fleetsim.http.max-connections = 64""")
      withSystem(c) {
        val run = Await.result(FleetRun.start(RunSettings(c)), 30.seconds)
        eventually(assert(run.metrics.devicesByState(Reporting) == Devices))
        eventually(assert(run.controller.get.counts.received("heartbeat") >= 2L * Devices))
        val summary = Await.result(run.finish("test over"), 60.seconds)
        assert(summary.messages.values.map(_.failed).sum == 0)
        assert(summary.controller.get.connections <= 13, summary.controller.get) // spread evenly, it was 64
      }
    }
  }

  "connection = per-call" should {
    "open a connection for every call, which the server closes after its reply" in {
      // Time enough that no call gives up on a busy machine: a connection the client abandoned, the
      // server may still accept, and a call abandoned before the server read it is a connection without a call.
      // A connection a call is costly on both sides: calls spaced out, so a busy machine keeps up.
      val c = config(s"""fleetsim.device-profile = "${apV1With("per-call")}"
        fleetsim.http { request-timeout = 30s, connect-timeout = 30s }
        fleetsim.controller { heartbeat-interval = 4s, stats-interval = 8s }""")
      val settings = RunSettings(c)
      assert(settings.connection == ConnectionMode.PerCall)
      withSystem(c) {
        val run = Await.result(FleetRun.start(settings), 30.seconds)
        def failures = run.metrics.snapshot().byKind.map((k, m) => k -> m.failures.filter(_._2 > 0)).mkString(", ")
        eventually(withClue(s"${run.metrics.devicesByState} $failures")(assert(run.metrics.devicesByState(Reporting) == Devices)))
        eventually(assert(run.controller.get.counts.received("heartbeat") >= 2L * Devices))
        val summary = Await.result(run.finish("test over"), 60.seconds)
        val controller = summary.controller.get
        val calls = controller.received.values.sum + controller.refused.values.sum + controller.injectedErrors.values.sum
        assert(calls > 3L * Devices)
        withClue(summary.messages.values.map(_.failures).mkString("failures: ", ", ", "")) {
          assert(summary.messages.values.map(_.failed).sum == 0)
        }
        assert(controller.connections == calls)
      }
    }
  }

  "connection = per-device" should {
    "keep one connection a device for all its calls" in {
      val c = config(s"""fleetsim.device-profile = "${apV1With("per-device")}" """)
      withSystem(c) {
        val run = Await.result(FleetRun.start(RunSettings(c)), 30.seconds)
        eventually(assert(run.metrics.devicesByState(Reporting) == Devices))
        eventually(assert(run.controller.get.counts.received("heartbeat") >= 2L * Devices))
        val summary = Await.result(run.finish("test over"), 60.seconds)
        assert(summary.controller.get.connections == Devices)
      }
    }
  }

  "connection = shared with --source-ips" should {
    "be refused with the profile's file:line: an address cannot be shared" in {
      val profile = apV1With("shared")
      val c = config(s"""fleetsim.device-profile = "$profile"
        fleetsim.http.source-ips = "127.0.1.0/28" """)
      val error = intercept[fleetsim.profile.ProfileError](RunSettings(c))
      val line = java.nio.file.Files.readAllLines(java.nio.file.Path.of(profile)).size // the last line says it
      assert(error.getMessage == s"$profile:$line: connection = shared cannot carry each device's own address (--source-ips): say per-device or per-call")
    }
  }

  "A plain HTTP fleet" should {
    "run on one I/O loop per 25,000 devices when its calls share connections, per 5,000 when each device holds its own" in {
      // ap-v1: the join says how often a device calls, so its devices count.
      def loops(connection: String, devices: Int) =
        fleetsim.run.FleetParts.ioLoops(RunSettings(config(s"""fleetsim.device-profile = "${apV1With(connection)}" """)), "http", devices, cores = 2)
      assert(Seq(20000, 25000, 25001).map(loops("shared", _)) == Seq(1, 1, 2))
      for connection <- Seq("per-device", "per-call") do assert(Seq(5000, 5001).map(loops(connection, _)) == Seq(1, 2), connection)
    }
  }

  "a plain connection" should {
    "be written, read and answered on the loop of the device that calls (nginx), in every mode" in {
      val nginx = HttpServers.nginx("")
      try
        withSystem(ConfigFactory.load()) {
          given scala.concurrent.ExecutionContext = scala.concurrent.ExecutionContext.parasitic // where the reply completes
          val settings = HttpSettings(ConfigFactory.load())
          val get = Request(MessageKind("stats", 0, periodic = true), "GET", "/", Array.emptyByteArray, Array.emptyByteArray)
          for mode <- ConnectionMode.values do
            val http = HttpTransport("127.0.0.1", nginx.port, Dialer("127.0.0.1", nginx.port, settings, None, None), mode, settings, devices = 10_000,
              ioLoops = 2) // two loops on two cores or more
            val io = http.io.getOrElse(fail("plain connections offer their loops to the devices"))
            // Each call made on its device's loop, as a device there makes it.
            val answered = (0 until 40).map { device =>
              val done = Promise[(Int, String, Reply)]()
              io.execute(io.of(device), () =>
                http.send(device, get).onComplete(r => done.success((device, Thread.currentThread.getName, r.get))))
              done.future
            }
            for (device, thread, reply) <- Await.result(Future.sequence(answered), 30.seconds) do
              assert(reply.isInstanceOf[Reply.Response], s"$mode: device $device: $reply")
              assert(thread == s"e2e-sockets-${io.of(device)}", s"$mode: device $device's reply was answered on $thread")
            Await.result(http.close(), 10.seconds)
        }
      finally nginx.stop()
    }
  }
