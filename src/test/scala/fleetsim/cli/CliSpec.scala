package fleetsim.cli

import fleetsim.run.RunSettings

import fleetsim.e2e.Output
import fleetsim.report.Summary
import fleetsim.tls.{CertificateAuthority, DeviceCertificates, Pem}
import org.scalatest.concurrent.Eventually
import org.scalatest.time.{Millis, Seconds, Span}
import org.scalatest.wordspec.AnyWordSpec

import java.io.{BufferedReader, InputStreamReader}
import java.net.{InetAddress, ServerSocket, URI}
import java.net.http.{HttpClient, HttpRequest, HttpResponse}
import java.nio.file.{Files, Path}
import java.util.concurrent.TimeUnit
import scala.jdk.CollectionConverters.*

/** The command line as a user runs it: the real entry point in its own JVM. */
class CliSpec extends AnyWordSpec with Eventually:
  override given patienceConfig: PatienceConfig = PatienceConfig(Span(30, Seconds), Span(100, Millis))

  private final case class Finished(code: Int, out: String, err: String)

  private def start(args: String*): Process = startWith(Nil, args)

  private def startWith(prefix: Seq[String], args: Seq[String]): Process =
    val command = prefix ++ _root_.fleetsim.e2e.ChildJvm.command("256m", args)
    ProcessBuilder(command.asJava).start()

  private def finish(p: Process, within: Int = 60): Finished =
    val out = Future(String(p.getInputStream.readAllBytes()))
    val err = Future(String(p.getErrorStream.readAllBytes()))
    assert(p.waitFor(within, TimeUnit.SECONDS), s"fleetsim did not exit within $within s")
    Finished(p.exitValue, out.get, err.get)

  /** Reads a stream on its own thread so a chatty child never blocks on a full pipe. */
  private final class Future[A](body: => A):
    private val result = java.util.concurrent.CompletableFuture.supplyAsync(() => body)
    def get: A = result.get(30, TimeUnit.SECONDS)

  private def fleetsim(args: String*): Finished = finish(start(args*))

  /** The same entry point in this JVM (Main.run), for a refusal that comes before any run starts:
    * a JVM of its own for each took the suite about 2 s of CPU to read its flags; the first test and
    * each run below show the command line in a JVM of its own.
    */
  private def refusal(args: String*): Finished =
    val (code, out, err) = BadInputSpec.runMain(args)
    Finished(code, out, err)

  private def assertUsageError(f: Finished, expected: String): Unit =
    assert(f.code == 2, f.err)
    val lines = f.err.linesIterator.filter(_.nonEmpty).toList
    assert(lines.head.startsWith("fleetsim: ") && lines.head.contains(expected), f.err)
    assert(lines.size == 2 && lines(1).startsWith("Try './fleetsim"), f.err)
    assert(!f.err.contains("Exception") && !f.err.contains("\tat "), f.err)

  private def tempDir(): Path = Files.createTempDirectory("fleetsim-cli")

  /** A JUnit XML report's test cases and failures, as the JDK's XML parser reads it. */
  private def junit(file: Path): (Int, Int) =
    val document = javax.xml.parsers.DocumentBuilderFactory.newInstance().newDocumentBuilder().parse(file.toFile)
    val suite = document.getDocumentElement
    assert(suite.getTagName == "testsuite" && suite.getAttribute("name") == "fleetsim")
    val cases = document.getElementsByTagName("testcase").getLength
    val failures = document.getElementsByTagName("failure").getLength
    assert(suite.getAttribute("tests") == cases.toString && suite.getAttribute("failures") == failures.toString)
    (cases, failures)

  "fleetsim run" should {
    "refuse bad flags with exit 2 and one line saying what is wrong" in {
      val ca = Files.writeString(tempDir().resolve("ca.pem"), "not yet a CA\n")
      val cases = Seq(
        Seq("run", "--devices", "-5") -> "--devices: '-5' is not a whole number",
        Seq("run", "--duration", "soon") -> "--duration: 'soon' is not a duration",
        Seq("run", "--devcies", "5") -> "did you mean --devices?",
        Seq("launch") -> "unknown command 'launch'",
        Seq("run", "--transport", "ftp") -> "--transport: 'ftp' is not one of http, ssh",
        Seq("run", "--controller-ssh", "localhost") -> "--controller-ssh: 'localhost' is not HOST:PORT",
        Seq("run", "--transport", "ssh", "--ssh-key", "/nonexistent/key") -> "--ssh-key: no such file '/nonexistent/key'",
        Seq("run", "--source-ips", "127.0.1.0/33") -> "--source-ips: '127.0.1.0/33': the prefix length must be a number from 8 to 32",
        Seq("run", "--source-ips", "192.0.2.1") -> "--source-ips: cannot call from 192.0.2.1",
        Seq("run", "--ca-file", "/nonexistent/ca.pem") -> "--ca-file: no such file '/nonexistent/ca.pem'",
        Seq("run", "--client-ca", "/nonexistent/ca.pem") -> "--client-ca: no such file '/nonexistent/ca.pem'",
        Seq("run", "--client-ca", ca.toString) -> "--client-ca and --client-ca-key go together",
        Seq("run", "--insecure-tls=maybe") -> "--insecure-tls: 'maybe' is not on or off")
      // The first as a user runs it, a JVM of its own; the others in this one.
      assertUsageError(fleetsim(cases.head._1*), cases.head._2)
      for (args, expected) <- cases.tail do assertUsageError(refusal(args*), expected)
    }

    "refuse a threshold on a figure the run will not have with exit 2, before the run, listing the figures there are" in {
      val f = refusal("run", "--threshold", "errors.rate < 1%", "--threshold", "latency.telemetry.p99 < 200ms", "--duration", "2s",
        "--results", tempDir().toString)
      assertUsageError(f, "fleetsim: --threshold: 'latency.telemetry.p99 < 200ms': no figure latency.telemetry.p99; " +
        "the figures of device profile ap-v1 are latency.<kind>.{p50, p90, p99, max} and messages.<kind>.{sent, ok, forbidden, failed} for join, heartbeat")
      assert(!f.out.contains("devices against"), f.out) // no device started
    }

    "refuse an unreadable or invalid config file with exit 2 and one line" in {
      assertUsageError(refusal("run", "--config", "/nonexistent/fleet.conf"), "cannot read config file")
      val file = Files.writeString(tempDir().resolve("bad.conf"), "fleetsim.fleet.devices = lots\n")
      assertUsageError(refusal("run", "--config", file.toString), "devices")
      val broken = Files.writeString(tempDir().resolve("broken.conf"), "fleetsim { fleet { devices = \n")
      assertUsageError(refusal("run", "--config", broken.toString), "is not valid HOCON")
    }

    "refuse a misspelt setting in a config file with exit 2, its file:line and the setting meant" in {
      val dir = tempDir()
      val typo = Files.writeString(dir.resolve("typo.conf"), "pekko.loglevel = DEBUG\nfleetsim.fleet.devcies = 500\n")
      assertUsageError(refusal("run", "--config", typo.toString),
        s"fleetsim: $typo:2: unknown setting fleetsim.fleet.devcies (did you mean fleetsim.fleet.devices?); the settings are listed")
      val far = Files.writeString(dir.resolve("far.conf"), "fleetsim.frobnicate = 3\n")
      assertUsageError(refusal("run", "--config", far.toString), s"fleetsim: $far:1: unknown setting fleetsim.frobnicate; the settings are listed")
      val fine = Files.writeString(dir.resolve("fine.conf"), "pekko.loglevel = INFO\nfleetsim.fleet.devices = 5\n")
      val f = fleetsim("run", "--config", fine.toString, "--duration", "2s", "--dashboard", "off", "--results", dir.resolve("run").toString)
      assert(f.code == 0, f.err)
      assert(Summary.read(dir.resolve("run/summary.json")).devices.target == 5)
    }

    "name the port taken, which server wanted it, and the flag that moves it" in {
      def taken(service: String, flag: String, args: String*): Unit =
        val socket = ServerSocket(0, 50, InetAddress.getLoopbackAddress)
        try
          val port = socket.getLocalPort
          val f = fleetsim((Seq("run", s"--$flag", port.toString, "--duration", "1s", "--results", tempDir().toString) ++ args)*)
          assert(f.code == 1, f.err)
          assert(f.err.trim == s"fleetsim: port $port ($service) is already in use: choose another with --$flag (0 picks a free one)")
        finally socket.close()
      taken("http", "controller-port")
      taken("dashboard", "dashboard-port")
      val state = tempDir()
      taken("ssh", "ssh-port", "--transport", "ssh", "--config",
        Files.writeString(state.resolve("c.conf"), s"fleetsim.controller.state-dir = \"$state\"").toString)
    }

    "run a short SSH fleet whose status line and summary show the tunnels" in {
      val dir = tempDir()
      val conf = Files.writeString(dir.resolve("c.conf"), s"""fleetsim.controller.state-dir = "$dir/state"\nfleetsim.ssh.known-hosts = "$dir/known_hosts"\n""")
      // Until Ctrl-C: a duration would race a slow machine's first handshakes.
      val p = start("run", "--transport", "ssh", "--devices", "20", "--heartbeat-interval", "1s",
        "--config", conf.toString, "--results", dir.resolve("run").toString)
      Output(p.getInputStream).await("tunnels 20 up", seconds = 120)
      p.destroy() // SIGTERM
      assert(p.waitFor(60, TimeUnit.SECONDS), "fleetsim did not stop on SIGTERM")
      val summary = Summary.read(dir.resolve("run/summary.json"))
      assert(summary.run.transport == "ssh")
      assert(summary.tunnels.get.opened == 20 && summary.tunnels.get.upAtEnd == 20)
      assert(summary.controller.get.tunnelled("heartbeat") == summary.messages("heartbeat").ok)
    }

    "refuse, before the run, --client-certs that lack a usable certificate for any of its devices: exit 2, one line naming them" in {
      val ca = CertificateAuthority.create("test CA")
      val profile = RunSettings(com.typesafe.config.ConfigFactory.load()).profile
      def file(n: Int) = DeviceCertificates.fileName("{mac}", n, profile.identityName(n))
      /** A folder with a certificate and key for devices 0 until `devices`, as `spoil` leaves it. */
      def folder(devices: Int)(spoil: Path => Unit = _ => ()): Path =
        val dir = tempDir()
        for n <- 0 until devices do
          Pem.write(ca.issueClient(profile.identityName(n)), dir.resolve(s"${file(n)}.pem"), Some(dir.resolve(s"${file(n)}.key")))
        spoil(dir)
        dir
      def refused(dir: Path, expected: String*): Unit =
        val f = refusal("run", "--tls", "--client-certs-required", "--client-certs", dir.toString, "--devices", "5", "--dashboard", "off",
          "--results", tempDir().toString)
        assert(f.code == 2, f.err)
        val lines = f.err.linesIterator.filter(_.nonEmpty).toList
        assert(lines.size == 1 && lines.head.startsWith(s"fleetsim: --client-certs $dir: "), f.err)
        expected.foreach(e => assert(lines.head.contains(e), f.err))
        assert(!f.err.contains("Exception") && !f.err.contains("\tat "), f.err)
        assert(!f.out.contains("devices against"), f.out) // no device started
      refused(folder(3)(),
        s"2 of 5 devices have no usable certificate: device 3 (${file(3)}.pem: missing), device 4 (${file(4)}.pem: missing); ",
        "give devices 0..4 each a NAME.pem with NAME.key, or a NAME.p12", "or run fewer devices (--devices 3)", "or use --client-ca")
      refused(folder(5)(dir => Files.copy(dir.resolve(s"${file(3)}.key"), dir.resolve(s"${file(2)}.key"), java.nio.file.StandardCopyOption.REPLACE_EXISTING)),
        s"1 of 5 devices have no usable certificate: device 2 (${file(2)}.key: key does not match certificate);")
      refused(folder(5)(dir => Files.writeString(dir.resolve(s"${file(1)}.pem"), "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU\n")),
        s"1 of 5 devices have no usable certificate: device 1 (${file(1)}.pem: not PEM);")
    }

    "refuse up front a fleet that cannot fit the open-file limit" in {
      val f = refusal("run", "--devices", "100", "--max-connections", "1000000000")
      assert(f.code == 1, f.err)
      assert(f.err.contains("open files") && f.err.contains("ulimit -n") && f.err.linesIterator.size == 1, f.err)
      val ssh = refusal("run", "--transport", "ssh", "--devices", "1000000")
      assert(ssh.code == 1, ssh.err)
      assert(ssh.err.contains("1000000 SSH tunnels") && ssh.err.contains("own process") && ssh.err.contains("spread the fleet"), ssh.err)
      // Over a cluster the devices' ends are spread, but the embedded controller's are all in the run's process.
      val cluster = refusal("run", "--cluster", "127.0.0.1:1", "--transport", "ssh", "--devices", "5000000")
      assert(cluster.code == 1, cluster.err)
      assert(cluster.err.contains("the controller embedded in this run would hold the server end of 5000000 SSH tunnels") &&
        cluster.err.contains("--controller") && cluster.err.linesIterator.size == 1, cluster.err)
    }

    "print its help with every flag" in {
      val f = fleetsim("run", "--help")
      assert(f.code == 0)
      RunCommand.Flags.foreach(flag => assert(f.out.contains(s"--${flag.name}")))
    }

    "run a short fleet and write a valid summary.json, and pass the thresholds it holds to with exit 0" in {
      val dir = tempDir().resolve("run")
      val f = fleetsim("run", "--devices", "20", "--duration", "4s", "--heartbeat-interval", "1s", "--stats-interval", "1s", "--results", dir.toString,
        "--threshold", "devices.byState.Reporting == 20", "--threshold", "latency.join.max < 30s")
      assert(f.code == 0, f.err + f.out)
      assert(f.out.contains("Reporting 20"), f.out)
      assert(f.out.contains("verdict: passed, 2 of 2 thresholds held") && f.out.contains("verdict.xml written to"), f.out)
      assert(junit(dir.resolve("verdict.xml")) == (2, 0))
      assert("fleetsim: dashboard on http://127\\.0\\.0\\.1:\\d+/".r.findFirstIn(f.out).isDefined, f.out)
      assert(Files.exists(dir.resolve("report.html")) && Files.exists(dir.resolve("timeseries.jsonl")) && Files.exists(dir.resolve("config.json")))
      val summary = Summary.read(dir.resolve("summary.json"))
      assert(summary.run.stopReason == "duration reached")
      assert(summary.devices.target == 20 && summary.devices.byState("Reporting") == 20)
      assert(summary.messages("heartbeat").ok > 0)
      assert(summary.controller.get.received("heartbeat") == summary.messages("heartbeat").ok)
      assert(summary.latencyMs("heartbeat").p99 > 0)
      assert(summary.process.threadsPeak > 0 && summary.process.heapUsedPeakBytes > 0)
    }

    "count every device that joined as started, when the run ends while the ramp still starts them" in {
      // A run of a moment in a fresh JVM: devices started in its last moment join before they hear the end.
      val dir = tempDir().resolve("run")
      val f = fleetsim("run", "--devices", "2000", "--duration", "200ms", "--dashboard", "off", "--results", dir.toString) // 10 s of ramp
      assert(f.code == 0, f.err + f.out)
      val summary = Summary.read(dir.resolve("summary.json"))
      val registered = summary.controller.get.registered
      assert(summary.devices.started < 2000, summary.devices) // ended mid-ramp indeed
      assert(summary.devices.started >= registered && summary.devices.started >= summary.messages("join").ok, f.out)
    }

    "fail a threshold with exit 3, a verdict table, the verdict in summary.json and a JUnit verdict.xml" in {
      val dir = tempDir().resolve("run")
      val f = fleetsim("run", "--devices", "5", "--duration", "3s", "--heartbeat-interval", "1s", "--dashboard", "off", "--results", dir.toString,
        "--threshold", "latency.join.p99 < 0.001ms", "--threshold", "devices.target == 5")
      assert(f.code == 3, f.err + f.out)
      val table = f.out.linesIterator.dropWhile(!_.contains("verdict:")).take(3).toList
      assert(table.head == "  verdict: FAILED, 1 of 2 thresholds failed", f.out)
      assert(table(1).startsWith("    FAIL  latency.join.p99 < 0.001ms  ") && table(1).endsWith(" ms"), f.out)
      assert(table(2) == "    pass  devices.target == 5         5", f.out)
      assert(junit(dir.resolve("verdict.xml")) == (2, 1))
      val verdict = Summary.read(dir.resolve("summary.json")).verdict.get
      assert(!verdict.passed && verdict.thresholds.map(_.passed) == List(false, true))
      assert(!f.err.contains("Exception"), f.err)
    }

    "write the summary when stopped with SIGTERM" in {
      val dir = tempDir().resolve("run")
      val p = start("run", "--devices", "10", "--heartbeat-interval", "1s", "--results", dir.toString)
      Output(p.getInputStream).await("devices |") // the first status line: the fleet is up
      p.destroy() // SIGTERM
      assert(p.waitFor(60, TimeUnit.SECONDS), "fleetsim did not stop on SIGTERM")
      val summary = Summary.read(dir.resolve("summary.json"))
      assert(summary.run.stopReason == "interrupted")
      assert(summary.devices.target == 10)
      assert("\"stopReason\"\\s*:\\s*\"interrupted\"".r.findFirstIn(Files.readString(dir.resolve("report.html"))).isDefined)
    }

    "on Ctrl-C wait for the calls in flight, and on a second Ctrl-C stop at once, counting them interrupted" in {
      val dir = tempDir().resolve("run")
      // SIGINT as a terminal's foreground job has it, even when the tests run as a background job
      // (which has it ignored, passed on to its children, and left so by fleetsim as by the JVM).
      val p = startWith(Seq("env", "--default-signal=INT"), Seq("run", "--devices", "10", "--heartbeat-interval", "1s",
        "--request-timeout", "60s", "--dashboard", "off", "--results", dir.toString))
      try
        val output = Output(p.getInputStream)
        val url = "http://127\\.0\\.0\\.1:\\d+".r.findFirstIn(output.await("reference controller on")).get
        output.await("Reporting 10")
        // Every call from now on waits 30 s for its reply: half the request timeout.
        val faults = HttpRequest.newBuilder(URI.create(s"$url/admin/faults")).PUT(HttpRequest.BodyPublishers.ofString("""{"latencyMs":30000}""")).build()
        assert(HttpClient.newHttpClient().send(faults, HttpResponse.BodyHandlers.ofString()).statusCode == 200)
        // Two status lines later, a whole second of heartbeats (every device's, at 1 s) is in flight:
        // the next one may come right after the faults changed.
        output.await("devices |")
        output.await("devices |")
        def ctrlC() = ProcessBuilder("kill", "-INT", p.pid.toString).start().waitFor()
        ctrlC()
        output.await("Ctrl-C again to stop now")
        ctrlC()
        // Not the 60 s the calls in flight could take.
        assert(p.waitFor(20, TimeUnit.SECONDS), s"fleetsim did not stop on a second Ctrl-C; output:\n${output.text}")
        assert(p.exitValue == 130, output.text)
      finally p.destroyForcibly() // a run that failed the test would run until stopped
      val summary = Summary.read(dir.resolve("summary.json"))
      assert(summary.run.stopReason == "interrupted")
      val heartbeat = summary.messages("heartbeat")
      assert(heartbeat.sent == heartbeat.ok + heartbeat.forbidden + heartbeat.failed, heartbeat.toString)
      assert(heartbeat.failures.getOrElse("interrupted", 0L) > 0, heartbeat.toString)
    }

    "count failed MQTT connects as errors on its status line, and warn of --insecure-tls naming the broker" in {
      val closed = ServerSocket(0, 1, InetAddress.getLoopbackAddress)
      val port = closed.getLocalPort
      closed.close() // a port nothing listens on: every connect is refused
      val f = fleetsim("run", "--transport", "mqtt", "--broker", s"mqtt://127.0.0.1:$port", "--devices", "3", "--duration", "3s",
        "--dashboard", "off", "--results", tempDir().toString, "--insecure-tls")
      assert(f.code == 0, f.err)
      assert(f.err.contains("--insecure-tls: the broker's certificate is not checked"), f.err)
      val totals = "errors \\+\\d+ \\((\\d+) total\\)".r.findAllMatchIn(f.out).map(_.group(1).toLong).toSeq
      assert(totals.nonEmpty && totals.last > 0, f.out)
    }

    "leave its time series when killed outright, for `fleetsim report DIR` to rebuild the page from" in {
      val dir = tempDir().resolve("run")
      val p = start("run", "--devices", "10", "--heartbeat-interval", "1s", "--results", dir.toString)
      Output(p.getInputStream).await("Reporting 10")
      eventually(assert(Files.readAllLines(dir.resolve("timeseries.jsonl")).size >= 2))
      p.destroyForcibly() // SIGKILL: no shutdown hook, no summary
      assert(p.waitFor(30, TimeUnit.SECONDS))
      assert(!Files.exists(dir.resolve("summary.json")) && !Files.exists(dir.resolve("report.html")))
      val f = fleetsim("report", dir.toString)
      assert(f.code == 0, f.err)
      val page = Files.readString(dir.resolve("report.html"))
      assert(page.contains("\"summary\":null") && page.contains("\"Reporting\":10"))
      assertUsageError(fleetsim("report", tempDir().toString), "holds no timeseries.jsonl")
      assertUsageError(fleetsim("report", tempDir().resolve("nonexistent").toString), "no such folder")
    }
  }

  "fleetsim profile check" should {
    "refuse a JSON body that is not JSON once rendered with exit 2, one line naming file:line and the placeholder, no stack trace" in {
      val file = Files.writeString(tempDir().resolve("mac.conf"), "name = \"mine\"\njoin {\n  path = \"/register\"\n  json = \"\"\"{\"mac\":{{mac}}}\"\"\"\n}\n")
      assertUsageError(refusal("profile", "check", file.toString),
        s"fleetsim: $file:4: join json body is not JSON after rendering (expected value at column 8): quote a text placeholder: \"{{mac}}\"")
    }
  }

  "fleetsim node" should {
    "refuse a way of finding the other nodes it cannot use, with exit 2 and one line" in {
      assertUsageError(refusal("node", "--discovery", "zookeeper"), "--discovery: 'zookeeper' is not one of kubernetes-api, pekko-dns, config")
      assertUsageError(refusal("node", "--discovery", "config", "--seed-nodes", "127.0.0.1:25520"),
        "--seed-nodes and --discovery both say how to find the other nodes: give one")
      assertUsageError(refusal("node", "--discovery", "config"),
        "--discovery config needs the nodes' management addresses in a --config file: pekko.discovery.config.services.fleetsim-nodes.endpoints")
      assertUsageError(refusal("node", "--management-port", "7700"), "--management-port does nothing without --discovery: add --discovery")
      assertUsageError(refusal("controller", "--mqtt-port", "1884"), "--mqtt-port does nothing without --mqtt: add --mqtt")
      assertUsageError(refusal("ssh-gateway", "--ssh-port", "0"), "ssh-gateway needs --controller URL")
    }
  }

  "fleetsim controller" should {
    "serve protocol v1 on its own, and a fleet pointed at it with --controller reports to it" in {
      val controller = start("controller", "--port", "0", "--heartbeat-interval", "1s", "--state-dir", tempDir().toString)
      try
        val banner = BufferedReader(InputStreamReader(controller.getInputStream)).readLine()
        val url = "http://127.0.0.1:\\d+".r.findFirstIn(banner).getOrElse(fail(s"no address in '$banner'"))
        val dir = tempDir().resolve("run")
        val f = fleetsim("run", "--controller", url, "--devices", "10", "--duration", "3s", "--results", dir.toString)
        assert(f.code == 0, f.err)
        val summary = Summary.read(dir.resolve("summary.json"))
        assert(summary.devices.byState("Reporting") == 10)
        assert(summary.controller.isEmpty)
        val counts = HttpClient.newHttpClient().send(HttpRequest.newBuilder(URI.create(s"$url/admin/counts")).build(), HttpResponse.BodyHandlers.ofString())
        assert(counts.body.contains("\"registered\":10"), counts.body)
      finally controller.destroy()
    }

    "never print or write the credentials of a controller URL (http://user:password@host)" in {
      val controller = start("controller", "--port", "0", "--state-dir", tempDir().toString)
      try
        val banner = BufferedReader(InputStreamReader(controller.getInputStream)).readLine()
        val address = "127.0.0.1:\\d+".r.findFirstIn(banner).getOrElse(fail(s"no address in '$banner'"))
        val dir = tempDir().resolve("run")
        val f = fleetsim("run", "--controller", s"http://fleet:s3cr3t-pw@$address", "--devices", "3", "--duration", "2s",
          "--dashboard", "off", "--results", dir.toString)
        assert(f.code == 0, f.err)
        assert(f.out.contains(s"against http://***@$address"), f.out)
        val written = Seq("config.json", "summary.json", "report.html", "timeseries.jsonl").map(n => n -> Files.readString(dir.resolve(n)))
        for (name, text) <- written :+ ("stdout" -> f.out) :+ ("stderr" -> f.err) do
          assert(!text.contains("s3cr3t-pw"), s"the password is in $name")
        assert(written.toMap.apply("summary.json").contains(s"http://***@$address"))
      finally controller.destroy()
    }

    "start its MQTT broker with --mqtt: an MQTT fleet in another process reports through it, counted by the controller" in {
      val controller = start("controller", "--port", "0", "--mqtt", "--mqtt-port", "0", "--state-dir", tempDir().toString)
      try
        val lines = BufferedReader(InputStreamReader(controller.getInputStream))
        val url = "http://127.0.0.1:\\d+".r.findFirstIn(lines.readLine()).get
        val broker = "mqtt://127.0.0.1:\\d+".r.findFirstIn(lines.readLine()).getOrElse(fail("no broker line"))
        val profile = Files.writeString(tempDir().resolve("quick.conf"),
          _root_.fleetsim.profile.ProfileLoader.builtInText("iot-mqtt").get.replace("interval = 10s", "interval = 1s"))
        val dir = tempDir().resolve("run")
        val f = fleetsim("run", "--transport", "mqtt", "--broker", broker, "--device-profile", profile.toString, "--devices", "20",
          "--duration", "5s", "--dashboard", "off", "--results", dir.toString)
        assert(f.code == 0, f.err)
        val delivered = Summary.read(dir.resolve("summary.json")).messages("telemetry").ok
        val counts = HttpClient.newHttpClient().send(HttpRequest.newBuilder(URI.create(s"$url/admin/counts")).build(), HttpResponse.BodyHandlers.ofString()).body
        val received = "\"received\":\\{[^}]*\"telemetry\":(\\d+)".r.findFirstMatchIn(counts).map(_.group(1).toLong)
        assert(delivered > 0 && received.contains(delivered), s"delivered $delivered; controller: $counts")
      finally controller.destroy()
    }

    "serve HTTPS with --tls: a fleet that does not trust its CA is refused in one line, one that does runs" in {
      val state = tempDir()
      val controller = start("controller", "--port", "0", "--tls", "--heartbeat-interval", "1s", "--state-dir", state.toString)
      try
        val banner = BufferedReader(InputStreamReader(controller.getInputStream)).readLine()
        val url = "https://127.0.0.1:\\d+".r.findFirstIn(banner).getOrElse(fail(s"no address in '$banner'"))
        val ca = state.resolve("tls").resolve("ca.pem")
        assert(Files.isRegularFile(ca))
        assertUsageError(refusal("run", "--controller", url, "--devices", "5", "--duration", "2s"),
          s"the controller's certificate at $url is not signed by the system's trust store")
        val trusted = fleetsim("run", "--controller", url, "--ca-file", ca.toString, "--devices", "10", "--duration", "3s", "--dashboard", "off",
          "--results", tempDir().resolve("run").toString)
        assert(trusted.code == 0, trusted.err)
        assert(trusted.out.contains("Reporting") && !trusted.err.contains("insecure"), trusted.out)
        val dir = tempDir().resolve("insecure")
        val insecure = fleetsim("run", "--controller", url, "--insecure-tls", "--devices", "10", "--duration", "3s", "--dashboard", "off",
          "--results", dir.toString)
        assert(insecure.code == 0, insecure.err)
        assert("--insecure-tls".r.findAllIn(insecure.err).size == 1, insecure.err) // warned once
        assert(Summary.read(dir.resolve("summary.json")).devices.byState("Reporting") == 10)
      finally controller.destroy()
    }
  }
