package fleetsim.e2e

import fleetsim.report.Summary
import org.scalatest.wordspec.AnyWordSpec

import java.nio.file.Files

/** A scenario against a reference controller in its own process, driven as a user's tooling would
  * drive theirs: config rolled out by the user's HTTP call, then by their command, and between the
  * two a fault of the controller's own turned on by a call and off by its undo.
  */
class UserCallSpec extends AnyWordSpec:
  private val dir = Files.createTempDirectory("fleetsim-user-calls")

  /** The summary, and the controller's /admin/faults once the run is over. */
  private lazy val played: (Summary, String) = ScenarioPlays.withController(dir) { url =>
    val faults = (rate: Double) => s"""http { method = PUT, url = "$url/admin/faults", body = "{\\"errorRate\\": $rate}" }"""
    val (_, s) = ScenarioPlays.play(dir, Files.writeString(dir.resolve("calls.conf"), s"""
      stages = [ { devices = 20, over = 1s }, { hold = 19s } ]
      actions = [
        { at = 3s, name = by-call, config-push { http { method = POST, url = "$url/admin/config/bump" } } }
        { at = 9s, name = errors, call { ${faults(0.5)}, for = 2s, undo { ${faults(0)} } } }
        { at = 13s, name = by-command, config-push {
            command = ["python3", "-c", "import urllib.request as u; u.urlopen(u.Request('$url/admin/config/bump', method='POST'))"] } }
      ]
      thresholds = [ "action.by-call.convergence < 10s", "action.by-command.convergence < 10s" ]
      """), "--controller", url)
    (s, ScenarioPlays.get(s"$url/admin/faults"))
  }

  "A scenario's config push to another controller" should {
    "roll out by the user's HTTP call and by their command, every device applying each, with its convergence" in {
      val (s, _) = played
      val pushes = s.actions.filter(_.kind == "config-push")
      assert(pushes.map(a => (a.name, a.cut, a.recovered)) == Seq(("by-call", 20, 20), ("by-command", 20, 20)), s.actions)
      assert(pushes.forall(_.recoveryMs.p100.exists(_ > 0)), s.actions)
      assert(s.verdict.exists(_.passed), Summary.render(s))
    }
  }

  "A scenario's call" should {
    "turn a fault of another controller's on by the user's call, and off by its undo when its time is up" in {
      val (s, faultsAtEnd) = played
      val errors = s.actions.find(_.name == "errors").get
      assert(errors.kind == "call" && errors.devices == 0 && errors.forS == 2, errors)
      assert(errors.during.exists(_.errors > 0), errors) // the controller's 500s, while it was on
      assert(!faultsAtEnd.contains("\"errorRate\":0.5"), faultsAtEnd) // and off again (a rate of 0 is left out)
    }
  }
