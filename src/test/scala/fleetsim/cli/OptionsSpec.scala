package fleetsim.cli

import fleetsim.UsageError

import org.scalatest.wordspec.AnyWordSpec

import java.nio.file.Files
import scala.jdk.CollectionConverters.*

/** Flags, environment variables and config files layered into one Config. */
class OptionsSpec extends AnyWordSpec:
  private def settings(args: String*)(env: (String, String)*) =
    Options.parse("run", RunCommand.Flags, args.toList, env.toMap) match
      case Parsed.Settings(c) => c
      case Parsed.Help(_) => fail("expected settings")

  private def error(args: String*): String = intercept[UsageError](settings(args*)()).getMessage

  "Options" should {
    "layer flag over environment over config file over reference.conf" in {
      val file = Files.createTempFile("fleetsim", ".conf")
      Files.writeString(file, "fleetsim.fleet { devices = 7, ramp-rate = 3 }\nfleetsim.http.request-timeout = 9s")
      val c = settings("--config", file.toString, "--devices=42")("FLEETSIM_RAMP_RATE" -> "11", "FLEETSIM_DEVICES" -> "5")
      assert(c.getInt("fleetsim.fleet.devices") == 42)
      assert(c.getDouble("fleetsim.fleet.ramp-rate") == 11)
      assert(c.getString("fleetsim.http.request-timeout") == "9s")
      assert(c.getString("fleetsim.device.jitter") == "0.1")
    }
    "put a profile under the user's own settings" in {
      val large = settings("--profile", "large")()
      assert(large.getString("fleetsim.controller.heartbeat-interval") == "60s")
      assert(large.getInt("fleetsim.fleet.ramp-rate") == 10000)
      assert(settings("--profile", "large", "--heartbeat-interval", "5s")().getString("fleetsim.controller.heartbeat-interval") == "5s")
      assert(settings()().getString("fleetsim.controller.heartbeat-interval") == "10s")
      assert(error("--profile", "huge").contains("one of large"))
    }
    "say what is wrong with a bad value, naming the flag and what it expects" in {
      assert(error("--devices", "-5") == "--devices: '-5' is not a whole number of at least 1, like 1000")
      assert(error("--duration", "soon").startsWith("--duration: 'soon' is not a duration"))
      assert(error("--controller", "localhost:80").contains("http://127.0.0.1:8080"))
      assert(error("--devices").contains("needs a value"))
    }
    "suggest the flag a typo was meant to be" in {
      assert(error("--devcies", "5") == "unknown flag --devcies (did you mean --devices?)")
      assert(error("--frobnicate", "5") == "unknown flag --frobnicate")
    }
    "name an unreadable config file" in {
      assert(error("--config", "/nonexistent/fleet.conf").contains("/nonexistent/fleet.conf"))
    }
    "refuse a setting in a config file that reference.conf does not have, naming file:line and the setting meant" in {
      val file = Files.createTempFile("fleetsim", ".conf")
      Files.writeString(file, "pekko.loglevel = DEBUG\nfleetsim.fleet.devcies = 500\n")
      assert(error("--config", file.toString) == s"$file:2: unknown setting fleetsim.fleet.devcies (did you mean fleetsim.fleet.devices?); " +
        "the settings are listed in reference.conf and by --help")
      Files.writeString(file, "fleetsim.fleet.frobnicate = 3\n")
      assert(error("--config", file.toString).startsWith(s"$file:1: unknown setting fleetsim.fleet.frobnicate; the settings"))
      Files.writeString(file, "pekko.loglevel = DEBUG\nfleetsim.fleet.devices = 500\n")
      assert(settings("--config", file.toString)().getString("pekko.loglevel") == "DEBUG")
    }
    "take a repeatable flag again and again into a list; its variable holds several, and a config file a list" in {
      def thresholds(c: com.typesafe.config.Config) = c.getStringList("fleetsim.run.thresholds").asScala.toList
      assert(thresholds(settings()()) == Nil)
      assert(thresholds(settings("--threshold", "errors.rate < 1%", "--threshold=latency.heartbeat.p99 < 200ms")()) ==
        List("errors.rate < 1%", "latency.heartbeat.p99 < 200ms"))
      assert(thresholds(settings()("FLEETSIM_THRESHOLD" -> "errors.rate < 1% ; errors.count == 0")) == List("errors.rate < 1%", "errors.count == 0"))
      val file = Files.createTempFile("fleetsim", ".conf")
      Files.writeString(file, "fleetsim.run.thresholds = [\"errors.count < 5\"]\n")
      assert(thresholds(settings("--config", file.toString)()) == List("errors.count < 5"))
      // A flag replaces its variable's and the file's list, as it would any setting.
      assert(thresholds(settings("--config", file.toString, "--threshold", "errors.rate < 1%")("FLEETSIM_THRESHOLD" -> "errors.count == 0")) ==
        List("errors.rate < 1%"))
      assert(error("--threshold", "errors.rate ~ 1%").startsWith("--threshold: 'errors.rate ~ 1%' is not a threshold"))
      assert(intercept[UsageError](settings()("FLEETSIM_THRESHOLD" -> "errors.rate < 1%;fast")).getMessage.startsWith("FLEETSIM_THRESHOLD: 'fast'"))
      Files.writeString(file, "fleetsim.run {\n  thresholds = [\"errors.rate < 1%\", \"errors.rate < lots\"]\n}\n")
      assert(error("--config", file.toString).startsWith(s"$file:2: fleetsim.run.thresholds: 'errors.rate < lots': 'lots' is not a bound"))
      Files.writeString(file, "fleetsim.run.thresholds = \"errors.rate < 1%\"\n")
      assert(error("--config", file.toString).startsWith(s"$file:1: fleetsim.run.thresholds: not a list"))
    }
    "list every flag with its default in --help" in {
      Options.parse("run", RunCommand.Flags, List("--help")) match
        case Parsed.Help(text) =>
          RunCommand.Flags.foreach(f => assert(text.contains(s"--${f.name}")))
          assert(text.contains("(default: 100)"))
        case _ => fail("expected help")
    }
  }
