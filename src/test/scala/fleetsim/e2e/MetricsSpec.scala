package fleetsim.e2e

import com.typesafe.config.{Config, ConfigFactory}
import fleetsim.run.{FleetRun, RunSettings}
import fleetsim.device.DeviceState.Reporting
import fleetsim.protocol.ApiCall
import fleetsim.transport.FailureReason
import fleetsim.metrics.Sample
import org.apache.pekko.actor.typed.ActorSystem
import org.scalatest.concurrent.Eventually
import org.scalatest.time.{Millis, Seconds, Span}
import org.scalatest.wordspec.AnyWordSpec

import java.net.{DatagramPacket, DatagramSocket, InetAddress}
import java.nio.file.{Files, Path}
import java.util.concurrent.{LinkedBlockingQueue, TimeUnit}
import scala.concurrent.Await
import scala.concurrent.duration.*

/** The fleet's figures as Prometheus sees them, and lateness as an overloaded simulator shows it. */
class MetricsSpec extends AnyWordSpec with Eventually:
  override given patienceConfig: PatienceConfig = PatienceConfig(Span(60, Seconds), Span(100, Millis))

  private def config(devices: Int, extra: String = ""): Config =
    ConfigFactory.parseString(s"""
      fleetsim.fleet { devices = $devices, ramp-rate = 2000 }
      fleetsim.controller { heartbeat-interval = 1s, stats-interval = 2s }
      fleetsim.run.results-dir = "${Files.createTempDirectory("fleetsim-metrics")}"
      $extra
      """).withFallback(ConfigFactory.load()).resolve()

  /** Runs a fleet until every device has reported a few times; returns what `inspect` makes of it. */
  private def steadyRun[A](c: Config)(inspect: FleetRun => A): A =
    var result = Option.empty[A]
    withSystem(c) {
      val run = Await.result(FleetRun.start(RunSettings(c)), 30.seconds)
      val devices = run.settings.fleet.devices
      eventually(assert(run.metrics.devicesByState(Reporting) == devices))
      val start = run.metrics.snapshot().byKind(ApiCall.Heartbeat.key).ok
      eventually(assert(run.metrics.snapshot().byKind(ApiCall.Heartbeat.key).ok >= start + 3 * devices))
      result = Some(inspect(run))
    }
    result.get

  "/metrics" should {
    "parse as Prometheus text, and its counters agree with summary.json" in {
      steadyRun(config(100)) { run =>
        val summary = Await.result(run.finish("test over"), 60.seconds)
        val scrape = Scrape.from(run.dashboard.get.url + "metrics")
        for kind <- ApiCall.values.map(_.key) do
          val m = summary.messages(kind)
          withClue(s"$kind: ") {
            assert(scrape("fleetsim_messages_sent_total", "kind" -> kind) == m.sent)
            assert(scrape("fleetsim_messages_total", "kind" -> kind, "outcome" -> "ok") == m.ok)
            assert(scrape("fleetsim_messages_total", "kind" -> kind, "outcome" -> "forbidden") == m.forbidden)
            assert(FailureReason.values.map(r => scrape("fleetsim_messages_total", "kind" -> kind, "outcome" -> r.key)).sum == m.failed)
            assert(scrape("fleetsim_latency_seconds_count", "kind" -> kind) == m.sent)
            assert(scrape("fleetsim_controller_received_total", "kind" -> kind) == summary.controller.get.received(kind))
          }
        assert(scrape("jvm_threads_live_threads") > 0)
        assert(scrape("process_files_open_files") > 0)
        // Every metric the Grafana dashboard in the repo charts is one /metrics serves (GC pauses
        // appear after the first collection, hence the one asked for here).
        val grafana = Files.readString(Path.of("grafana", "fleetsim-dashboard.json"))
        val charted = """\b(?:fleetsim|jvm|process)_[a-z_]+""".r.findAllIn(grafana).toSet
        assert(charted.size > 10)
        eventually {
          System.gc()
          val now = Scrape.from(run.dashboard.get.url + "metrics")
          for name <- charted do assert(now.names(name).nonEmpty, s"the Grafana dashboard charts $name, which /metrics lacks")
        }
      }
    }

    "have as many fleetsim series for 2,000 devices as for 100" in {
      def series(devices: Int) = steadyRun(config(devices))(run => Scrape.from(run.dashboard.get.url + "metrics").names("fleetsim_"))
      val small = series(100)
      val large = series(2000)
      assert(small.nonEmpty && small == large)
    }
  }

  "--statsd" should {
    "push the same metrics to a StatsD agent" in {
      val agent = DatagramSocket(0, InetAddress.getLoopbackAddress)
      agent.setSoTimeout(10000)
      try
        steadyRun(config(20, s"""fleetsim.metrics.statsd = "127.0.0.1:${agent.getLocalPort}"""")) { _ =>
          val buffer = new Array[Byte](65536)
          val lines = Iterator.continually {
            val packet = DatagramPacket(buffer, buffer.length)
            agent.receive(packet) // gives up after the socket's timeout
            String(packet.getData, 0, packet.getLength).linesIterator.toList
          }.flatten
          // Etsy flavour: tags folded into the name, e.g. fleetsimMessages.kind.heartbeat.outcome.ok.statistic.count:42|c
          val deadline = 20.seconds.fromNow
          val counter = """fleetsimMessages\.kind\.heartbeat\.outcome\.ok\.statistic\.count:[0-9.]+\|c"""
          assert(lines.takeWhile(_ => deadline.hasTimeLeft()).exists(_.matches(counter)), "no heartbeat counter within 20 s")
        }
      finally agent.close()
    }
  }

  "A run's outputs" should {
    "each get the summary even when one before them fails" in {
      val c = config(5)
      withSystem(c) {
        val run = Await.result(FleetRun.start(RunSettings(c)), 30.seconds)
        val told = LinkedBlockingQueue[String]()
        run.add("broken", new fleetsim.report.Output {
          override def sample(s: Sample): Unit = throw IllegalStateException("a disk full, say")
          override def finish(summary: fleetsim.report.Summary): Unit = throw IllegalStateException("a disk full, say")
        })
        run.add("after", new fleetsim.report.Output {
          override def sample(s: Sample): Unit = told.add("sample")
          override def finish(summary: fleetsim.report.Summary): Unit = told.add("summary")
        })
        eventually(assert(run.metrics.devicesByState(Reporting) == 5 && told.contains("sample")))
        Await.result(run.finish("test over"), 60.seconds)
        assert(told.contains("summary"))
        for file <- Seq("summary.json", "report.html", "timeseries.jsonl") do assert(Files.isRegularFile(run.settings.resultsDir.resolve(file)), file)
      }
    }
  }

  "Lateness" should {
    "rise when the simulator is starved of threads" in {
      val c = config(200)
      withSystem(c) {
        val run = Await.result(FleetRun.start(RunSettings(c)), 30.seconds)
        val samples = LinkedBlockingQueue[Sample]()
        run.add("samples", new fleetsim.report.Output { override def sample(s: fleetsim.metrics.Sample): Unit = samples.add(s) })
        eventually(assert(run.metrics.devicesByState(Reporting) == 200))
        def heartbeatLatenessP99(seconds: Int): Double =
          samples.clear()
          (1 to seconds).map(_ => Option(samples.poll(10, TimeUnit.SECONDS)).get.latenessMs("heartbeat").p99).max
        val calm = heartbeatLatenessP99(3)
        // The thread the devices run on (200 plain HTTP devices share one loop: ADR 0016), hogged half a
        // second at a time, let go for 50 ms, and again: their wake-ups come due on time, but wait for the thread.
        val loop = fleetsim.transport.Sockets(summon[ActorSystem[?]]).io(1)
        @volatile var hogging = true
        def burn(): Unit = if hogging then
          val end = System.nanoTime() + 500_000_000L
          while System.nanoTime() < end do () // load, not a wait: the point is to keep the thread busy
          loop.after(0, 50.millis)(() => burn())
        loop.execute(0, () => burn())
        heartbeatLatenessP99(1) // the second the hog started in
        val starved = heartbeatLatenessP99(3)
        hogging = false
        assert(starved > 200 && starved > 4 * calm, s"heartbeat lateness p99: $calm ms calm, $starved ms starved")
        Await.result(run.finish("test over"), 60.seconds)
      }
    }
  }
