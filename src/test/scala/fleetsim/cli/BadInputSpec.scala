package fleetsim.cli

import org.scalatest.wordspec.AnyWordSpec

import java.io.{ByteArrayOutputStream, PrintStream}
import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.{Files, Path}
import java.util.concurrent.{CompletableFuture, TimeUnit}

/** Every flag of every command, given what a user gets wrong — a wrong type, a value out of range,
  * a path of the wrong kind (a file for a folder, a folder for a file, a file inside a file, a
  * missing one), a file of bytes that are not what it should hold — gets one line that says what is
  * wrong and exit code 2, never a stack trace. Through the real entry point (Main.run) in this JVM:
  * a JVM a case would take minutes; CliSpec runs the command line in its own JVM.
  */
class BadInputSpec extends AnyWordSpec:
  import BadInputSpec.*

  private val dir = Files.createTempDirectory("fleetsim-bad-input")
  private val aFile = Files.writeString(dir.resolve("a-file.txt"), "just text\n")
  private val aFolder = Files.createDirectories(dir.resolve("a-folder"))
  /** Bytes that are neither UTF-8 nor PEM nor HOCON nor a key. */
  private val garbage = Files.write(dir.resolve("garbage.bin"), Array[Byte](0xff.toByte, 0xfe.toByte, 0, 1, 2, '\n', 0xc3.toByte, 0x28))
  private val missing = dir.resolve("missing/nothing.txt")

  /** Values no flag of `kind` takes. */
  private def wrong(kind: ValueKind): Seq[String] = kind match
    case ValueKind.Count => Seq("-5", "0", "lots", "1.5", "99999999999")
    case ValueKind.CountOrAuto => Seq("-5", "0", "some", "99999999999")
    case ValueKind.Rate => Seq("0", "-1", "fast", "NaN", "Infinity")
    case ValueKind.Duration => Seq("soon", "60", "0", "-5s", "181d", "99999999999d", "5 parsecs")
    case ValueKind.Port => Seq("-1", "65536", "99999", "http")
    case ValueKind.Size => Seq("big", "5 parsecs")
    case ValueKind.Url => Seq("localhost:80", "ftp://127.0.0.1", "http://127.0.0.1:99999", "http://127.0.0.1:8080/api", "http://")
    case ValueKind.BrokerUrl => Seq("127.0.0.1:1883", "http://127.0.0.1", "mqtt://127.0.0.1:70000")
    case ValueKind.HostPort => Seq("localhost", "127.0.0.1:0", "127.0.0.1:65536", ":")
    case ValueKind.HostPorts => Seq("127.0.0.1:1,localhost", "127.0.0.1:99999")
    case ValueKind.Choice(_*) => Seq("nonsense", "")
    case ValueKind.Switch => Seq("maybe", "yes please")
    case ValueKind.Text => Seq("")
    case ValueKind.Seed => Seq("0", "lots", "1.5")
    case ValueKind.Threshold => Seq("", "fast", "errors.rate ~ 1%", "errors.rate = 1%", "errors.rate < lots", "latency.heartbeat.p99 < -5ms")
    case ValueKind.InputFile => Seq(aFolder.toString, missing.toString, "")
    case ValueKind.InputFolder => Seq(aFile.toString, missing.toString)
    case ValueKind.OutputFolder => Seq(aFile.toString, aFile.resolve("sub").toString)
    case ValueKind.OutputFile => Seq(aFolder.toString, aFile.resolve("known_hosts").toString)

  /** What else a command needs to get as far as using the flag; a run that gets past its checks ends in a second. */
  private def around(command: String, flag: Flag): Seq[String] = command match
    case "run" =>
      val ssh = Set(Flag.ControllerSsh, Flag.SshUser, Flag.SshKey, Flag.SshPassword, Flag.HostKeys, Flag.KnownHosts, Flag.MaxHandshakes, Flag.SshTarget)
      (if flag == Flag.Duration then Nil else Seq("--duration", "1s")) ++
        (if flag == Flag.Dashboard then Nil else Seq("--dashboard", "off")) ++
        (if flag == Flag.Results then Nil else Seq("--results", dir.resolve("results").toString)) ++
        (if ssh(flag) then Seq("--transport", "ssh") else Nil) ++
        (if flag == Flag.DevicesCsv then Seq("--device-profile", "iot-telemetry") else Nil) ++
        (if flag == Flag.ClientCaKey then Seq("--client-ca", aFile.toString) else Nil) ++
        (if flag == Flag.ClientCa then Seq("--client-ca-key", aFile.toString) else Nil)
    case _ => Nil

  private val commands = Seq("run" -> RunCommand.Flags, "controller" -> ControllerCommand.Flags, "node" -> NodeCommand.Flags,
    "ssh-gateway" -> SshGatewayCommand.Flags)

  "Every command's every flag" should {
    for (command, flags) <- commands; flag <- flags do
      s"refuse what $command --${flag.name} (${flag.kind.expected}) cannot take, in one line with exit 2" in {
        for value <- wrong(flag.kind) do
          val args = Seq(command, s"--${flag.name}=$value") ++ around(command, flag)
          assertOneLine(args, mentioning = s"--${flag.name}")
      }
  }

  "A flag's file that holds the wrong bytes" should {
    // Past the check of its kind: the file is there, but what is in it is not what it should be.
    val cases = Seq(
      Seq("run", "--ca-file", garbage.toString),
      Seq("run", "--client-ca", garbage.toString, "--client-ca-key", garbage.toString),
      Seq("run", "--transport", "ssh", "--ssh-key", garbage.toString),
      Seq("run", "--transport", "ssh", "--host-keys", "strict", "--known-hosts", garbage.toString),
      Seq("run", "--transport", "ssh", "--host-keys", "accept-new", "--known-hosts", aFile.toString),
      Seq("run", "--device-profile", "iot-telemetry", "--devices-csv", garbage.toString),
      Seq("run", "--device-profile", garbage.toString),
      Seq("run", "--config", garbage.toString),
      Seq("controller", "--iot-tokens", garbage.toString),
      Seq("controller", "--config", garbage.toString),
      Seq("profile", "check", garbage.toString))
    for args <- cases do
      s"be refused in one line with exit 2: ${args.mkString(" ").replace(dir.toString, "DIR")}" in
        assertOneLine(args ++ (if args.head == "run" then Seq("--duration", "1s", "--dashboard", "off") else Nil), mentioning = "")
  }

  "A run's other mistakes" should {
    "name a bind address the machine does not have, not a port in use" in
      // 192.0.2.1 is TEST-NET-1: no machine has it, and nothing is sent to it.
      assertOneLine(Seq("run", "--dashboard-host", "192.0.2.1", "--duration", "1s", "--results", dir.resolve("results").toString),
        mentioning = "cannot listen on 192.0.2.1 (dashboard): this machine has no such address: give --dashboard-host an address it has")
    "name a threshold's figure the run will not have, or a bound in the wrong unit, with the figure meant" in {
      val run = Seq("--duration", "1s", "--dashboard", "off", "--results", dir.resolve("results").toString)
      assertOneLine(Seq("run", "--threshold", "latncy.heartbeat.p99 < 200ms") ++ run,
        mentioning = "--threshold: 'latncy.heartbeat.p99 < 200ms': no figure latncy.heartbeat.p99 (did you mean latency.heartbeat.p99?)")
      assertOneLine(Seq("run", "--transport", "mqtt", "--threshold", "latency.heartbeat.p99 < 200ms") ++ run,
        mentioning = "no figure latency.heartbeat.p99; the figures of device profile iot-mqtt are")
      assertOneLine(Seq("run", "--threshold", "errors.rate < 5") ++ run,
        mentioning = "--threshold: 'errors.rate < 5': errors.rate is a percentage: give its bound in %, like 1%")
      val file = Files.writeString(dir.resolve("thresholds.conf"), "fleetsim.run.thresholds = [\n  \"errors.rate < 1%\"\n  \"lateness.join.p99 < 1s\"\n]\n")
      assertOneLine(Seq("run", "--config", file.toString) ++ run, mentioning = s"$file:3: 'lateness.join.p99 < 1s': no figure lateness.join.p99")
      val early = Files.writeString(dir.resolve("abort-after.conf"), "fleetsim.run.thresholds = [\n  { threshold = \"errors.rate < 5%\"\n    abort-after = 30s }\n]\n")
      assertOneLine(Seq("run", "--config", early.toString) ++ run,
        mentioning = s"$early:3: abort-after delays abort-on-fail, which this block does not have: add abort-on-fail = true")
      val typo = Files.writeString(dir.resolve("abort-typo.conf"), "fleetsim.run.thresholds = [\n  { threshold = \"errors.rate < 5%\", abort-on-fail = true, abort-afer = 30s }\n]\n")
      assertOneLine(Seq("run", "--config", typo.toString) ++ run, mentioning = s"$typo:2: unknown key 'abort-afer' in a threshold block (did you mean abort-after?)")
    }
    "name the flag a CSV came from and the line that is not UTF-8" in
      assertOneLine(Seq("run", "--device-profile", "iot-telemetry", "--devices-csv", garbage.toString, "--duration", "1s"),
        mentioning = s"--devices-csv: identity.csv: $garbage:1 is not UTF-8 text (byte 0xff)")
  }

  "A scenario's mistakes" should {
    "each be one line with the scenario's file:line, before the run" in {
      val run = Seq("--dashboard", "off", "--results", dir.resolve("results").toString)
      def scenario(text: String) = Files.writeString(Files.createTempFile(dir, "scenario", ".conf"), text)
      val stages = "stages = [ { devices = 10, over = 1s, hold = 5s } ]\n"
      val typo = scenario(stages + "actoins = []\n")
      assertOneLine(Seq("run", "--scenario", typo.toString) ++ run, mentioning = s"$typo:2: unknown key 'actoins' in scenario")
      val threshold = scenario(stages + "actions = [ { at = 1s, power-cut { devices = 30%, for = 2s } } ]\nthresholds = [\n \"action.power-cutt.recovery.p99 < 1s\"\n]\n")
      assertOneLine(Seq("run", "--scenario", threshold.toString) ++ run,
        mentioning = s"$threshold:4: 'action.power-cutt.recovery.p99 < 1s': no figure action.power-cutt.recovery.p99 (did you mean action.power-cut.recovery.p99?)")
      val setting = scenario(stages + "fleetsim {\n  heartbeat-intervall = 5s\n}\n")
      assertOneLine(Seq("run", "--scenario", setting.toString) ++ run, mentioning = s"$setting:3: unknown setting fleetsim.heartbeat-intervall")
      val valid = scenario(stages)
      assertOneLine(Seq("run", "--scenario", valid.toString, "--devices", "50") ++ run,
        mentioning = s"--devices (or FLEETSIM_DEVICES): the stages of scenario $valid set it")
      val late = scenario(stages + "actions = [ { at = 5s, power-cut { devices = all, for = 2s } } ]\n")
      assertOneLine(Seq("run", "--scenario", late.toString) ++ run, mentioning = s"$late:2: power-cut at 5 seconds acts until 7 seconds, after the scenario's end")
      val drop = scenario(stages + "actions = [\n  { at = 2s, ssh-drop {} }\n]\n")
      assertOneLine(Seq("run", "--scenario", drop.toString) ++ run,
        mentioning = s"$drop:3: ssh-drop drops sessions this run's http devices do not hold: run the scenario with --transport ssh")
    }
  }

  "A config file's setting for a flag" should {
    "be held to what the flag takes, naming file:line" in {
      val file = Files.writeString(dir.resolve("fleet.conf"), "fleetsim {\n  fleet.devices = 0\n}\n")
      assertOneLine(Seq("run", "--config", file.toString), mentioning = s"$file:2: fleetsim.fleet.devices: '0' is not a whole number")
      Files.writeString(file, "fleetsim.controller.url = \"http://user:secret@127.0.0.1:99999\"\n")
      val out = assertOneLine(Seq("run", "--config", file.toString), mentioning = s"$file:1: fleetsim.controller.url")
      assert(!out.contains("secret"), s"the password is in the error: $out")
      // HOCON reads a bare number as milliseconds: a duration without its unit is refused, with the fix.
      val bare = Files.writeString(dir.resolve("bare.conf"), "fleetsim.fleet.duration = 60\n")
      assertOneLine(Seq("run", "--config", bare.toString), mentioning = s"$bare:1: fleetsim.fleet.duration: '60' has no unit: write 60s for seconds")
      // A setting without a flag, the same.
      Files.writeString(bare, "fleetsim.device.backoff.min = 100\n")
      assertOneLine(Seq("run", "--config", bare.toString, "--duration", "1s"), mentioning = s"$bare: 1: Invalid value at 'backoff.min': '100' has no unit")
    }
  }

  /** Runs `args` and checks the way a user would: exit 2, one line naming `mentioning` (and a hint
    * to --help), no stack trace. Returns what was printed.
    */
  private def assertOneLine(args: Seq[String], mentioning: String): String =
    val (code, out, err) = runMain(args)
    val shown = s"./fleetsim ${args.mkString(" ")}\nexit $code\nstdout: $out\nstderr: $err"
    val lines = err.linesIterator.filter(_.nonEmpty).toList
    assert(code == 2, shown)
    assert(lines.nonEmpty && lines.head.startsWith("fleetsim: ") && lines.head.contains(mentioning), shown)
    assert(lines.size <= 2 && lines.drop(1).forall(_.startsWith("Try './fleetsim")), shown)
    assert(!Trace.exists(t => (out + err).contains(t)), shown)
    err

object BadInputSpec:
  private val Trace = Seq("Exception", "\tat ", "Caused by")

  /** Main.run with its output captured; a run that wrongly gets going is cut off after a minute. */
  private[cli] def runMain(args: Seq[String]): (Int, String, String) =
    val out = ByteArrayOutputStream()
    val err = ByteArrayOutputStream()
    val code = CompletableFuture.supplyAsync(() => Main.run(args.toList, PrintStream(out, true, UTF_8), PrintStream(err, true, UTF_8)))
    try (code.get(60, TimeUnit.SECONDS), out.toString(UTF_8), err.toString(UTF_8))
    catch case e: java.util.concurrent.ExecutionException => (-1, out.toString(UTF_8), err.toString(UTF_8) + s"\nthrown: ${e.getCause}")
