package fleetsim.scenario

import fleetsim.control.{Leave, Reach, RunAction, UserCall}
import fleetsim.device.Selection
import org.scalatest.wordspec.AnyWordSpec

import java.nio.file.{Files, Path}
import scala.concurrent.duration.*

/** A scenario file as its user writes it: what it compiles to, and each mistake said in one line with its file:line. */
class ScenarioSpec extends AnyWordSpec:
  private val dir = Files.createTempDirectory("fleetsim-scenarios")

  private def file(text: String): Path = Files.writeString(Files.createTempFile(dir, "scenario", ".conf"), text)
  private def read(text: String): Either[String, Scenario] = Scenario.read(file(text))
  private def mistake(text: String): String = read(text).fold(identity, s => fail(s"read: $s"))

  "A scenario" should {
    "compile its stages into resizes in time, and its length" in {
      val s = read("""
        stages = [
          { devices = 100, over = 10s }   # 10 a second
          { hold = 20s }
          { devices = 150, rate = 25 }    # 2 s
          { devices = 50, over = 4s }     # shrinks a step a second
          { devices = 0, hold = 5s }      # at once
        ]
        """).toOption.get
      val t = s.timeline(rampRate = 200).toOption.get
      assert(t.resizes.head == Resize(Duration.Zero, 100, 10.0))
      assert(t.resizes(1) == Resize(30.seconds, 150, 25.0))
      assert(t.resizes.slice(2, 6).map(r => (r.at, r.devices)) == Seq(32.seconds -> 125, 33.seconds -> 100, 34.seconds -> 75, 35.seconds -> 50))
      assert(t.resizes.last.at == 36.seconds && t.resizes.last.devices == 0)
      assert(t.length == 41.seconds && t.planned == 150)
    }

    "take devices out of the fleet as their stage says they leave: vanishing unless it says cleanly" in {
      val t = read("""
        stages = [
          { devices = 100, hold = 10s }
          { devices = 60, leave = cleanly }
          { devices = 20, over = 2s, leave = vanish, hold = 5s }
        ]
        """).toOption.get.timeline(rampRate = 100).toOption.get
      assert(t.resizes.map(r => (r.devices, r.leave)) == Seq(100 -> Leave.Vanish, 60 -> Leave.Cleanly, 40 -> Leave.Vanish, 20 -> Leave.Vanish))
      assert(mistake("stages = [ { devices = 5, hold = 1m }, { devices = 2,\n leave = politely } ]")
        .contains(".conf:2: a stage's leave is vanish or cleanly, not 'politely'"))
      assert(mistake("stages = [ { devices = 5, hold = 1m }, { hold = 1m, leave = cleanly } ]").contains("give it devices"))
    }

    "grow at the run's ramp rate where a stage says no pace" in {
      val t = read("stages = [ { devices = 400 }, { hold = 1m } ]").toOption.get.timeline(rampRate = 200).toOption.get
      assert(t.resizes == Seq(Resize(Duration.Zero, 400, 200.0)) && t.length == 62.seconds)
    }

    "make its actions with the seed they are given, named by their kind unless named" in {
      val s = read("""
        stages = [ { devices = 10, hold = 1m } ]
        actions = [
          { at = 5s, power-cut { devices = 30%, for = 10s } }
          { at = 20s, name = building-b, power-cut { devices = "100-199", for = 5s } }
          { at = 30s, reboot-wave { devices = all, over = 10s } }
        ]
        thresholds = [ "action.power-cut.recovery.p99 < 5s" ]
        """).toOption.get
      assert(s.actionNames == Seq("power-cut", "building-b", "reboot-wave"))
      assert(s.actions.head.make(7) == RunAction.PowerCut(Reach(0, Int.MaxValue, Selection.Share(0.3, 7)), 10.seconds))
      assert(s.actions(1).make(7) == RunAction.PowerCut(Reach(100, 200, Selection.All), 5.seconds))
      assert(s.actions(2).make(7) == RunAction.RebootWave(1.0, 7, 10.seconds, 5.seconds))
      assert(s.thresholds.map(_.unwrapped) == Seq("action.power-cut.recovery.p99 < 5s"))
    }

    "say each mistake in one line with its file:line" in {
      def at(line: Int, text: String, says: String) =
        val f = file(text)
        val problem = Scenario.read(f).fold(identity, s => fail(s"read: $s"))
        assert(problem.startsWith(s"$f:$line: ") && problem.contains(says), problem)
      at(2, "stages = [ { devices = 1, hold = 1s } ]\nstagse = []", "unknown key 'stagse' in scenario")
      at(1, "stages = [ { devices = 1, hodl = 1s } ]", "unknown key 'hodl' in a stage (did you mean hold?)")
      at(1, "stages = [ { devices = many } ]", "a stage's devices must be a whole number")
      at(1, "stages = [ { devices = 5, over = 2s, rate = 3 } ]", "over or rate, not both")
      // Durations without their unit, which HOCON reads as milliseconds.
      at(1, "stages = [ { devices = 5, hold = 60 } ]", "must be a duration")
      at(2, "stages = [ { devices = 5, hold = 1m } ]\nactions = [ { at = 30, power-cut { devices = 30%, for = 5s } } ]", "at must be a duration with its unit")
      at(2, "stages = [ { devices = 5, hold = 1m } ]\nactions = [ { at = 5s, power-cut { devices = 30%, for = 5 } } ]", "must be a duration")
      at(2, "stages = [ { devices = 5, hold = 1m } ]\nactions = [ { at = 5s, power-cut { devices = 30% } } ]", "a power cut needs for")
      at(2, "stages = [ { devices = 5, hold = 1m } ]\nactions = [ { at = 5s, power-cut { devices = lots, for = 5s } } ]",
        "devices must be a share (30%), a range of device numbers (100-199) or all")
      at(2, "stages = [ { devices = 5, hold = 1m } ]\nactions = [ { at = 5s, powercut { devices = 30%, for = 5s } } ]",
        s"unknown key 'powercut' in an action (its kinds: ${Scenario.actionKinds.mkString(", ")}) (did you mean power-cut?)")
      at(2, "stages = [ { devices = 5, hold = 1m } ]\nactions = [ { at = 5s, power-cut { devices = 30%, for = 5s, why = 1 } } ]",
        "unknown key 'why' in a power-cut")
      at(4, "stages = [ { devices = 5, hold = 1m } ]\nactions = [\n { at = 5s, power-cut { devices = 30%, for = 5s } }\n" +
        " { at = 9s, power-cut { devices = 10%, for = 5s } } ]", "two actions are named power-cut")
    }

    "read the actions on the network and on the controller, and their mistakes" in {
      val s = read("""
        stages = [ { devices = 10, hold = 1m } ]
        actions = [
          { at = 5s, partition { devices = 20%, for = 10s } }
          { at = 20s, degrade { devices = all, latency = 200ms, loss = 5%, for = 10s } }
          { at = 30s, controller-fault { error-rate = 20%, latency = 50ms, for = 5s } }
          { at = 40s, broker-drop {} }
          { at = 50s, ssh-drop {} }
          { at = 51s, config-push { http { url = "https://ctl.example/api/rollout", headers { Authorization = "Bearer t0ken" } } } }
          { at = 52s, name = rollback, config-push { command = ["./rollout.sh", "v2"] } }
        ]
        """).fold(fail(_), identity)
      assert(s.actions.map(_.make(9)) == Seq(
        RunAction.Partition(Reach(0, Int.MaxValue, Selection.Share(0.2, 9)), 10.seconds),
        RunAction.Degrade(Reach.All, 200.millis, 0.05, 10.seconds),
        RunAction.ControllerFault(0.2, 0, 50.millis, 5.seconds),
        RunAction.BrokerDrop,
        RunAction.SshDrop,
        RunAction.ConfigPush(Some(UserCall.Http("POST", "https://ctl.example/api/rollout", "", Map("Authorization" -> "Bearer t0ken")))),
        RunAction.ConfigPush(Some(UserCall.Command(Seq("./rollout.sh", "v2"))))))
      // What a line may say of a push holds neither its headers nor a URL's credentials.
      assert(UserCall.Http("POST", "https://me:s3cret@ctl.example/api?token=x", "", Map("Authorization" -> "Bearer t0ken")).toString == "POST https://ctl.example/api")
      def push(inner: String) = mistake(s"stages = [ { devices = 5, hold = 1m } ]\nactions = [ { at = 5s, config-push { $inner } } ]")
      assert(push("http { url = \"ftp://x\" }").contains("a config push's url is http:// or https://"))
      assert(push("http { url = \"https://x\", metod = POST }").contains("unknown key 'metod' in a config push's http"))
      assert(push("command = \"./rollout.sh v2\"").contains("a config push's command is the program and its arguments"))
      assert(push("command = [\"a\"], http { url = \"https://x\" }").contains("not both"))
      // A call of the user's, and its undo when its time is up.
      val call = read("stages = [ { devices = 5, hold = 1m } ]\nactions = [ { at = 5s, call { command = [\"./fault.sh\", \"on\"], for = 30s, " +
        "undo { http { method = PUT, url = \"http://127.0.0.1:8474/proxies/ctl\", body = \"{}\" } } } } ]").fold(fail(_), identity)
      assert(call.actions.head.make(0) == RunAction.Call(UserCall.Command(Seq("./fault.sh", "on")), 30.seconds,
        Some(UserCall.Http("PUT", "http://127.0.0.1:8474/proxies/ctl", "{}", Map.empty))))
      def calling(inner: String) = mistake(s"stages = [ { devices = 5, hold = 1m } ]\nactions = [ { at = 5s, call { $inner } } ]")
      assert(calling("for = 5s").contains("a call needs http { ... } or command = [...]"))
      assert(calling("command = [\"a\"], undo { command = [\"b\"] }").contains("a call's undo is made when its for is over"))
      assert(read("stages = [ { devices = 5, hold = 1m } ]\nactions = [ { at = 5s, flapping { devices = 10%, every = 10s, down = 3s, for = 30s } } ]")
        .toOption.get.actions.head.make(1) == RunAction.Flapping(Reach(0, Int.MaxValue, Selection.Share(0.1, 1)), 10.seconds, 3.seconds, 30.seconds))
      assert(mistake("stages = [ { devices = 5, hold = 1m } ]\nactions = [ { at = 5s, flapping { devices = all, every = 3s, down = 3s, for = 9s } } ]")
        .contains("a flapping link is down for less than every"))
      assert(mistake("stages = [ { devices = 5, hold = 1m } ]\nactions = [ { at = 5s, degrade { devices = all, for = 5s } } ]")
        .contains("a degraded link needs latency or loss"))
      assert(mistake("stages = [ { devices = 5, hold = 1m } ]\nactions = [ { at = 5s, degrade { devices = all, loss = 0.05, for = 5s } } ]")
        .contains("a degraded link's loss must be a percentage, like 5% (got '0.05')"))
      assert(mistake("stages = [ { devices = 5, hold = 1m } ]\nactions = [ { at = 5s, controller-fault { error-rate = 80%, throttle-rate = 30%, for = 5s } } ]")
        .contains("error-rate and throttle-rate add up to more than 100%"))
    }

    "be as docs/scenarios.md shows it: its example reads whole, and lasts 86 s" in {
      val doc = Files.readString(Path.of("docs/scenarios.md"))
      val example = doc.linesIterator.dropWhile(_ != "## The file").drop(1).dropWhile(_.isEmpty)
        .takeWhile(l => l.startsWith("    ") || l.isEmpty).map(_.drop(4)).mkString("\n")
      val s = read(example).fold(fail(_), identity)
      assert(s.actionNames == Seq("power-cut", "west-wing", "reboot-wave"))
      assert(s.timeline(rampRate = 200).map(_.length) == Right(86.seconds))
    }

    "refuse actions that start or still act after its end, and stages that last no time" in {
      val late = read("stages = [ { devices = 5, over = 1s, hold = 29s } ]\nactions = [ { at = 25s, power-cut { devices = all, for = 10s } } ]")
        .toOption.get.timeline(100)
      assert(late.left.exists(_.contains("power-cut at 25 seconds acts until 35 seconds, after the scenario's end at 30 seconds")), late)
      val after = read("stages = [ { devices = 5, over = 1s, hold = 29s } ]\nactions = [ { at = 1m, power-cut { devices = all, for = 10s } } ]")
        .toOption.get.timeline(100)
      assert(after.left.exists(_.contains("starts after the scenario's end")), after)
      assert(mistake("stages = []").contains("at least one stage"))
      assert(mistake("stages = [ { hold = 5s } ]").contains("the first stage must say how many devices"))
    }
  }
