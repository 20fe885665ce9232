package fleetsim.e2e

import fleetsim.device.Selection
import fleetsim.report.Summary
import fleetsim.run.RunSettings
import org.scalatest.BeforeAndAfterAll
import org.scalatest.wordspec.AnyWordSpec

import java.nio.file.{Files, Path}
import java.util.concurrent.{Executors, TimeUnit}
import scala.concurrent.{Await, ExecutionContext, Future, Promise}
import scala.concurrent.duration.*
import scala.jdk.CollectionConverters.*

/** The scenarios shipped in scenarios/, each run as `./fleetsim run --scenario FILE` runs it, against
  * the embedded reference controller: each passes its own thresholds on this machine, and what its
  * actions did is in the summary as a user would check it. A scenario mostly waits on its timeline,
  * so they all play at once, each started 4 s after the one before: the ramps, the busy part of a run
  * (and a ramp takes 4 s at most here), never overlap. Each test takes its own's summary.
  */
class ScenarioRunSpec extends AnyWordSpec with BeforeAndAfterAll:
  private val dir = Files.createTempDirectory("fleetsim-scenario-runs")
  private val players = ExecutionContext.fromExecutorService(Executors.newCachedThreadPool())
  private val starts = Executors.newSingleThreadScheduledExecutor()
  /** The plays start with the suite, not with the spec: ScalaTest's JUnit engine makes two instances
    * of a spec besides the one it runs, and each would play them all again beside it.
    */
  override def beforeAll(): Unit = Seq(soak, partition, rebootWave, powerCut, brokerFailover, rollouts, aborted)
  override def afterAll(): Unit =
    starts.shutdown()
    players.shutdown()

  private val started = java.util.concurrent.atomic.AtomicInteger()
  /** `play`, started 4 s after the one before on its own thread. */
  private def playing[A](body: => A): Future[A] =
    val played = Promise[A]()
    starts.schedule((() => played.completeWith(Future(body)(using players))): Runnable, 4L * started.getAndIncrement(), TimeUnit.SECONDS)
    played.future
  private def result[A](played: Future[A]): A = Await.result(played, 5.minutes)

  private def play(scenario: Path, flags: String*): (RunSettings, Summary) = ScenarioPlays.play(dir, scenario, flags*)

  private def shipped(name: String): Path = Path.of("scenarios", name)

  /** How many of `devices` a share drawn with `seed` hits, as in one process or any cluster. */
  private def drawn(devices: Int, share: Double, seed: Long): Int = (0 until devices).count(Selection.Share(share, seed).contains)

  // The longest first (beforeAll starts them in this order): four at a time, they end together.
  /** soak.conf with its half hour made 30 s: each of its times replaced, each replacement found. In 30 s
    * the flapping link's lost calls (each a 5 s timeout) are a larger share of the calls than in 30
    * minutes, and the machine runs four scenarios at once: the bar on errors and latency is set for that.
    */
  private lazy val soak = playing {
    val shortened = Seq("over = 1m" -> "over = 2s", "hold = 29m" -> "hold = 28s", "at = 5m" -> "at = 4s", "every = 2m" -> "every = 4s",
      "down = 20s" -> "down = 2s", "for = 10m" -> "for = 12s", "at = 17m" -> "at = 17s", "over = 5m" -> "over = 5s", "down = 30s" -> "down = 2s",
      "errors.rate < 1%" -> "errors.rate < 5%", "latency.heartbeat.p99 < 200ms" -> "latency.heartbeat.p50 < 200ms",
      "lateness.heartbeat.p99 < 100ms" -> "lateness.heartbeat.p50 < 100ms")
      .foldLeft(Files.readString(shipped("soak.conf"))) { case (text, (from, to)) =>
        assert(text.contains(from), s"soak.conf no longer says $from")
        text.replace(from, to)
      }
    play(Files.writeString(dir.resolve("soak.conf"), shortened))
  }
  /** Against a reference controller in its own process: the summary, and what its /admin/counts said at the end. */
  private lazy val partition = playing {
    ScenarioPlays.withController(dir) { url =>
      val (_, s) = play(shipped("partition.conf"), "--controller", url, "--seed", "3")
      (s, ScenarioPlays.get(s"$url/admin/counts"))
    }
  }
  private lazy val rebootWave = playing(play(shipped("reboot-wave.conf"), "--seed", "7"))
  private lazy val powerCut = playing(play(shipped("power-cut.conf"), "--seed", "42"))
  private lazy val brokerFailover = playing(play(shipped("broker-failover.conf")))
  private lazy val rollouts = Seq("http", "ssh", "mqtt").map(t => t -> playing(play(shipped("config-rollout.conf"), "--transport", t))).toMap
  /** The fault from the start, every call failing: the threshold, judged only from 3 s in, aborts
    * the run then, not at its first second.
    */
  private lazy val aborted = playing(play(Files.writeString(dir.resolve("abort.conf"), """
    stages = [ { devices = 50, over = 100ms }, { hold = 40s } ]
    actions = [ { at = 0s, controller-fault { error-rate = 100%, for = 30s } } ]
    thresholds = [
      { threshold = "errors.rate < 5%", abort-on-fail = true, abort-after = 3s }
      "devices.started == 50"
    ]
    """)))

  "scenarios/power-cut.conf" should {
    "cut the power of exactly the seeded 30%, bring them all back with a fresh join each, and pass its thresholds" in {
      val (settings, s) = result(powerCut)
      assert(settings.fleet.devices == 200 && s.run.seed == 42 && s.run.scenario.contains("scenarios/power-cut.conf"))
      val cut = s.actions.head
      val hit = drawn(200, 0.3, 42) // action 0 draws with the run's seed
      assert(cut.name == "power-cut" && cut.devices == hit && cut.cut == hit && cut.recovered == hit && cut.neverBack == 0, cut)
      // Each came back with a join of its own (a join timed out on a busy machine is tried again: more, never fewer).
      assert(s.messages("join").ok >= 200 + hit && s.controller.get.received("join") >= s.messages("join").ok, Summary.render(s))
      // Timed from each device's power-on, 6 s after the cut, to Reporting: within what was left of the run.
      assert(cut.atS >= 5 && cut.atS <= 8 && cut.recoveryMs.p100.exists(p => p > 0 && p < (s.run.durationS - cut.atS - 6) * 1000), cut)
      // What the controller absorbed meanwhile: the herd's joins, back together after the outage.
      assert(cut.during.exists(w => w.seconds >= 6 && w.joinsPerSPeak >= hit / 4 && w.errors == 0), cut)
      assert(s.verdict.exists(_.passed), Summary.render(s))
    }
  }

  "scenarios/reboot-wave.conf" should {
    "reboot half the fleet in a wave, every device back, and pass its thresholds" in {
      val (_, s) = result(rebootWave)
      val wave = s.actions.head
      val hit = drawn(300, 0.5, 7)
      assert(wave.kind == "reboot-wave" && wave.cut == hit && wave.recovered == hit, wave)
      assert(s.controller.get.received("join") >= 300 + hit && s.controller.get.received("join") >= s.messages("join").ok, Summary.render(s))
      assert(s.verdict.exists(_.passed), Summary.render(s))
    }
  }

  "scenarios/partition.conf" should {
    "cut the seeded quarter off on the fleet's side of a reference controller in its own process, and have them all back, none lost" in {
      val (s, counts) = result(partition)
      val cut = s.actions.head
      val hit = drawn(200, 0.25, 3)
      assert(cut.kind == "partition" && cut.devices == hit && cut.cut == hit && cut.recovered == hit, cut)
      assert(cut.during.exists(w => w.seconds >= 10 && w.errors > 0), cut) // the cut-off devices' lost calls
      assert(s.devices.byState("Reporting") == 200, Summary.render(s))
      // Cut off for 10 s with heartbeats every 2 s, each lost after 2 s: most lost three and joined again.
      assert(s.messages("heartbeat").failures.getOrElse("timedOut", 0L) > 0 && s.messages("join").ok >= 200 + hit / 2, Summary.render(s))
      assert(counts.contains("\"registered\":200"), counts)
      assert(s.verdict.exists(_.passed), Summary.render(s))
    }
  }

  "scenarios/broker-failover.conf" should {
    "have every MQTT sensor reconnect after the broker drops them all, and pass its thresholds" in {
      val (settings, s) = result(brokerFailover)
      assert(settings.transport.name == "mqtt")
      val drop = s.actions.head
      assert(drop.kind == "broker-drop" && drop.devices == 300 && drop.cut == 300 && drop.recovered == 300, drop)
      // A sensor still connecting at the drop (a busy machine's slow ramp) is back without a reconnect: one lost once up.
      assert(s.mqtt.exists(m => m.reconnects > 0 && m.connects >= 300 + m.reconnects), Summary.render(s))
      assert(s.verdict.exists(_.passed), Summary.render(s))
    }
  }

  "scenarios/config-rollout.conf" should {
    for transport <- Seq("http", "ssh", "mqtt") do
      s"converge over $transport: every device applies the new configuration, and how long that took is reported" in {
        val (settings, s) = result(rollouts(transport))
        assert(settings.transport.name == transport)
        val rollout = s.actions.head
        assert(rollout.name == "rollout" && rollout.kind == "config-push" && rollout.cut == 100 && rollout.recovered == 100, rollout)
        assert(rollout.recoveryMs.p100.exists(_ > 0), rollout) // the convergence: the last device's apply, from the push
        assert(s.verdict.exists(_.passed), Summary.render(s))
      }
  }

  "scenarios/soak.conf, shortened to 30 s" should {
    "hold its bar through a flapping branch office and a firmware rollout, no device lost" in {
      val (_, s) = result(soak)
      assert(s.actions.map(_.kind) == Seq("flapping", "reboot-wave") && s.actions.forall(a => a.cut > 0 && a.neverBack == 0), s.actions)
      assert(s.verdict.exists(_.passed), Summary.render(s))
    }
  }

  "A threshold that aborts on failure" should {
    "stop the run the first second it fails from its abort-after on, with a failed verdict saying so" in {
      val (_, s) = result(aborted)
      assert(s.run.stopReason == "aborted: errors.rate < 5% failed" && s.run.durationS >= 3 && s.run.durationS < 20, Summary.render(s))
      val verdict = s.verdict.get
      assert(!verdict.passed && verdict.failed == 1, Summary.render(s))
      val judged = verdict.thresholds.head
      assert(!judged.passed && judged.value.exists(_ >= 5) && judged.message.endsWith("the run aborted"), judged)
      val second = """at (\d+) s""".r.findFirstMatchIn(judged.message).map(_.group(1).toInt)
      assert(second.exists(at => at >= 3 && at < 10), judged) // failing from the first second, judged from the third
      assert(s.controller.get.injectedErrors.values.sum > 0, Summary.render(s)) // the controller fault's 500s
    }
  }

  "every scenario in scenarios/" should {
    "be one this suite runs" in {
      val files = Files.list(Path.of("scenarios")).iterator.asScala.map(_.getFileName.toString).filter(_.endsWith(".conf")).toSet
      assert(files == Set("power-cut.conf", "reboot-wave.conf", "partition.conf", "broker-failover.conf", "config-rollout.conf", "soak.conf"))
    }
  }
