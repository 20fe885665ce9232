package fleetsim.e2e

import fleetsim.report.Summary
import org.scalatest.wordspec.AnyWordSpec

import java.io.{BufferedReader, InputStreamReader}
import java.net.URLDecoder
import java.nio.charset.StandardCharsets.{ISO_8859_1, US_ASCII, UTF_8}
import java.nio.file.{Files, Path}
import java.util.concurrent.TimeUnit
import scala.jdk.CollectionConverters.*
import scala.util.Try

/** No reply can break fleetsim's own HTTP/1.1 client (fleetsim.transport: Http1,
  * PipelinedConnection, HttpTransport) or be counted ok: small fleets, run as a user runs them (the
  * command line in a child JVM with the launcher's heap), against hostile_server.py
  * (src/test/resources/hostile), which answers the join and then breaks HTTP — endless bodies,
  * huge heads, lying lengths, garbage, tokens that would inject header lines. Each run must end on
  * time with exit code 0 and summary.json, its log free of stack traces and at most one line per
  * kind of failure a second; each hostile call must fail under its reason; and the server's record
  * of what it received must hold nothing the profile did not say.
  */
class HostileServersSpec extends AnyWordSpec:
  import HostileServersSpec.*

  // Each a child JVM of 5 s, started by the first test that needs it.
  private lazy val replies = HostileRun("replies", "by-path", Set("tooLarge", "protocolError", "unreadable"))
  private lazy val strayBytes = HostileRun("stray-bytes", "short-length", Set("rejected", "protocolError"))
  private lazy val limits = HostileRun("limits", "by-path", Set("tooLarge", "protocolError"))
  private lazy val inject = HostileRun("inject", "inject", Set("unsafeValue"))
  private lazy val slow = HostileRun("slow", "by-path", Set.empty, Seq("-Dfleetsim.http.keep-alive-timeout=1s"))

  /** Paths the profiles say: /MODE[/SIZE]/TOKEN, and the join. */
  private val ModePaths = """/join|/[a-z0-9-]+(/\d+)?/tok-\d+""".r

  "A fleet against broken replies (replies.conf: a kind a way, a connection a call)" should {
    "end on time, exit 0, write summary.json, log no stack trace, at most a line per failure kind a second" in
      replies.endedWell()
    "count an endless chunked body as tooLarge" in replies.counted("endlessChunked", "tooLarge")
    "count an endless body behind a Content-Length of a terabyte as tooLarge" in replies.counted("endlessLength", "tooLarge")
    "count a 10 MiB header as tooLarge" in replies.counted("hugeHeader", "tooLarge")
    "count 1,000 header lines as tooLarge" in replies.counted("manyHeaders", "tooLarge")
    "count a status line of 2 KiB as tooLarge" in replies.counted("longStatusLine", "tooLarge")
    "count a Content-Length longer than the body, then a close, as protocolError" in replies.counted("longLength", "protocolError")
    "count a negative Content-Length as protocolError" in replies.counted("negativeLength", "protocolError")
    "count garbage instead of HTTP as protocolError" in replies.counted("garbage", "protocolError")
    "count status 999 as protocolError" in replies.counted("status999", "protocolError")
    "count a connection reset in the middle of a body as protocolError" in replies.counted("closeMidBody", "protocolError")
    // The connection was made: a reset is a broken connection, not connectFailed (which says the server could not be reached).
    "count a connection reset before any reply as protocolError" in replies.counted("resetAtOnce", "protocolError")
    "count 200 {} as unreadable when the profile keeps a value without a default" in replies.counted("emptyJson", "unreadable")
    "count 200 hello as unreadable when the profile keeps a value without a default" in replies.counted("hello", "unreadable")
    "count honest replies ok all along" in replies.allOk("fine")
    "send nothing the profile did not say" in replies.sentOnly(ModePaths)
  }

  "A fleet against replies longer than their Content-Length (stray-bytes.conf)" should {
    "end on time, exit 0, write summary.json, log no stack trace, at most a line per failure kind a second" in
      strayBytes.endedWell()
    "never read the stray bytes as the start of the next reply: every 500 fails, none is counted ok" in {
      val m = strayBytes.messages("report")
      assert(m.sent > 0 && m.ok == 0 && m.failed == m.sent, s"sent ${m.sent}, ok ${m.ok}, failures ${m.failures}; ${strayBytes.why}")
      assert(m.failures.keySet.subsetOf(Set("rejected", "protocolError")), s"failures ${m.failures}; ${strayBytes.why}")
    }
    "send nothing the profile did not say" in strayBytes.sentOnly(ModePaths)
  }

  "A fleet with reply limits of its own (limits.conf, shared connections)" should {
    "end on time, exit 0, write summary.json, log no stack trace, at most a line per failure kind a second" in
      limits.endedWell()
    for kind <- Seq("bigBody", "bigChunkedBody", "endlessChunked", "bigHead", "manyHeaders", "longStatusLine") do
      s"count $kind, past a limit, as tooLarge (a call sharing its connection may fail protocolError)" in
        limits.counted(kind, "tooLarge", collateral = Set("protocolError"))
    "go on with new connections: replies just under the limits are counted ok" in {
      for kind <- Seq("underBody", "underHead", "underStatusLine") do
        val m = limits.messages(kind)
        withClue(s"$kind: ") {
          val counts = s"sent ${m.sent}, ok ${m.ok}, failures ${m.failures}; ${limits.why}"
          assert(m.sent == m.ok + m.forbidden + m.failed, counts)
          assert(m.ok > 0 && m.ok * 2 >= m.sent, counts) // a few may go down with a connection a bad reply closed
          assert(m.failures.keySet.subsetOf(Set("tooLarge", "protocolError")), counts)
        }
    }
    "send nothing the profile did not say" in limits.sentOnly(ModePaths)
  }

  "A fleet handed tokens holding CR, LF, NUL (inject.conf)" should {
    "end on time, exit 0, write summary.json, log no stack trace, at most a line per failure kind a second" in
      inject.endedWell()
    "put no header line and no request of the token's on the wire" in {
      // At the start of a line: inside a JSON body the token is there escaped, as it should be.
      val wire = inject.receivedText
      val headerLine = wire.contains("\nX-Injected")
      val requestLine = wire.contains("\nGET /smuggled") || inject.requests.exists(_.path.startsWith("/smuggled"))
      assert(!headerLine, s"a header line X-Injected went out: ${inject.where}")
      assert(!requestLine, s"a second request line GET /smuggled went out: ${inject.where}")
    }
    "send the token in a path percent-encoded, answered ok" in {
      inject.allOk("byPath")
      val paths = inject.requests.map(_.path).filter(_.startsWith("/by-path/"))
      val sent = paths.nonEmpty
      assert(sent, s"no /by-path/ call on the wire; ${inject.where}")
      val decoded = paths.map(p => URLDecoder.decode(p.replace("+", "%2B"), UTF_8).stripPrefix("/by-path/")).toSet
      val asKept = decoded.subsetOf(Injected.toSet)
      val encoded = paths.exists(_.toUpperCase.contains("%0D%0A")) && paths.exists(_.contains("%00"))
      assert(asKept, s"paths on the wire, not the tokens percent-encoded: ${paths.distinct.map(escape).mkString(", ")}")
      assert(encoded, s"no %0D%0A or no %00 in the paths on the wire: ${paths.distinct.map(escape).mkString(", ")}")
    }
    "not send a call whose header value would hold the token: unsafeValue" in {
      val m = inject.messages("byHeader")
      assert(m.sent > 0 && m.ok == 0 && m.failures == Map("unsafeValue" -> m.sent),
        s"sent ${m.sent}, ok ${m.ok}, failures ${m.failures}; ${inject.why}")
      val sent = inject.requests.count(_.path.startsWith("/by-header"))
      assert(sent == 0, s"$sent /by-header calls went out; ${inject.where}")
    }
    "escape the token in JSON and form bodies, answered ok" in {
      inject.allOk("byJson")
      inject.allOk("byForm")
    }
    "send nothing the profile did not say" in
      inject.sentOnly("""/join|/by-path/\S+|/by-header|/by-json|/by-form""".r, headers = Set("X-Token"))
  }

  "A fleet whose replies take longer than its idle timeout (slow.conf: keep-alive-timeout 1s, replies after 1.5 s)" should {
    "end on time, exit 0, write summary.json, log no stack trace" in slow.endedWell()
    "count every slow reply ok: a connection with a call in flight is not idle" in slow.allOk("slow")
  }

object HostileServersSpec:
  import org.scalatest.Assertions.{assert, fail, withClue}

  private val Devices = 6
  private val DurationS = 5
  private val RequestTimeoutS = 2
  /** The run ends at its duration, plus the request timeout and a second for its last calls. */
  private val EndsWithinS = DurationS + RequestTimeoutS + 1
  /** How long a child JVM may take besides, to start and to write its results. */
  private val StartingS = 12

  /** The tokens hostile_server.py's join hands out in mode inject. */
  private val Injected = Seq("abc\r\nX-Injected: 1", "x HTTP/1.1\r\nHost: h\r\n\r\nGET /smuggled HTTP/1.1", "nul\u0000byte")

  private def resource(name: String): Path = Path.of(getClass.getResource(s"/hostile/$name").toURI)

  /** A request as the server received it: its request line's path, header lines and body. */
  final case class Received(connection: String, line: String, headers: Seq[String], body: Array[Byte]):
    def path: String = line.split(' ').lift(1).getOrElse("")
    override def toString: String = s"$connection: ${(line +: headers).map(escape).mkString(" | ")}"

  private def escape(s: String): String = s.flatMap(c => if c < 0x20 || c >= 0x7f then f"\\x${c.toInt}%02x" else c.toString)

  /** One fleet of [[Devices]] against hostile_server.py in `mode`, with the profile `name`.conf,
    * through the command line in a child JVM with the heap the launcher would give it. Results and
    * what the server received stay in target/hostile/`name`.
    *
    * @param reasons the reasons its calls may fail for: the log may have a line a second for each
    * @param jvmOptions the fleet's JVM options besides its heap, such as settings (-Dfleetsim...)
    */
  final class HostileRun(name: String, mode: String, reasons: Set[String], jvmOptions: Seq[String] = Nil):
    private val dir = Path.of("target", "hostile", name).toAbsolutePath
    private val received = dir.resolve("received")
    private val results = dir.resolve("results")

    private val (port, code, seconds, stdout, stderr) =
      if Files.exists(dir) then deleteTree(dir)
      Files.createDirectories(dir)
      val python = Programs.require("Python 3", "/usr/bin/python3", "python3")
      val server = ProcessBuilder(python.toString, resource("hostile_server.py").toString, mode, "--record", received.toString,
        "--until-stdin-closes").redirectError(dir.resolve("server.err").toFile).start()
      try
        val banner = Option(BufferedReader(InputStreamReader(server.getInputStream, US_ASCII)).readLine()).getOrElse("")
        val port = "port (\\d+)".r.findFirstMatchIn(banner).map(_.group(1).toInt)
          .getOrElse(fail(s"hostile_server.py $mode printed '$banner', not its port: ${Try(Files.readString(dir.resolve("server.err")))}"))
        // The main classes and their libraries, as the jar has them: not the tests' logback-test.xml.
        val command = ChildJvm.command("256m", options = jvmOptions, testClasses = false, args = Seq("run",
          "--controller", s"http://127.0.0.1:$port", "--device-profile", resource(s"$name.conf").toString,
          "--devices", Devices.toString, "--duration", s"${DurationS}s", "--request-timeout", s"${RequestTimeoutS}s",
          "--dashboard", "off", "--results", results.toString))
        val started = System.nanoTime()
        val fleet = ProcessBuilder(command.asJava)
          .redirectOutput(dir.resolve("stdout.txt").toFile).redirectError(dir.resolve("stderr.txt").toFile).start()
        val ended = fleet.waitFor(EndsWithinS + StartingS, TimeUnit.SECONDS)
        val seconds = (System.nanoTime() - started) / 1e9
        if !ended then
          fleet.destroyForcibly()
          fleet.waitFor(30, TimeUnit.SECONDS)
        (port, Option.when(ended)(fleet.exitValue), seconds, Files.readString(dir.resolve("stdout.txt")),
          Files.readString(dir.resolve("stderr.txt")))
      finally
        server.destroy()
        server.waitFor(10, TimeUnit.SECONDS)

    private val summaryFile = results.resolve(Summary.FileName)
    private lazy val summary: Option[Summary] = Option.when(Files.exists(summaryFile))(Summary.read(summaryFile))

    /** How the run ended, for the failure message of any of its tests. */
    def why: String =
      val ended = code.fold(f"did not end within ${EndsWithinS + StartingS} s: killed")(c => f"exit code $c after $seconds%.1f s")
      val results = if summary.isDefined then "summary.json written" else "no summary.json"
      s"fleet against hostile_server.py $mode: $ended, $results ($dir)"

    /** Every kind's counts, and the log's lines without their times, trace lines and repeats. */
    def whatHappened: String =
      val counts = summary.fold("")(_.messages.toSeq.sortBy(_._1)
        .map((k, m) => s"$k: sent ${m.sent} ok ${m.ok} failed ${m.failed} ${m.failures}").mkString("\n  ", "\n  ", ""))
      val log = stderr.linesIterator.filterNot(Trace.matches).map(_.replaceFirst("^\\d\\d:\\d\\d:\\d\\d\\.\\d{3} ", "")).toSeq
        .groupBy(identity).toSeq.sortBy(-_._2.size).take(8).map((line, all) => s"${all.size}x $line")
      s"$why$counts\nits log, by line, without times and traces:\n  ${log.mkString("\n  ")}"

    def where: String = s"see $received"

    def messages(kind: String): fleetsim.report.MessageCounts =
      val s = summary.getOrElse(fail(why))
      s.messages.getOrElse(kind, fail(s"no message kind $kind in summary.json; $why"))

    def endedWell(): Unit =
      assert(code.contains(0), whatHappened)
      assert(seconds <= EndsWithinS + StartingS, whatHappened)
      val s = summary.getOrElse(fail(whatHappened))
      assert(s.run.durationS <= EndsWithinS + 0.5, s"the run took ${s.run.durationS} s; $why")
      assert(s.devices.started == Devices, why)
      for (kind, m) <- s.messages do
        withClue(s"$kind: ") {
          assert(m.sent == m.ok + m.forbidden + m.failed, whatHappened)
          assert(m.failed == m.failures.values.sum, whatHappened)
        }
      val traces = (stdout.linesIterator ++ stderr.linesIterator).filter(Trace.matches).take(5).toSeq
      val traced = traces.nonEmpty
      assert(!traced, s"a stack trace in its output:\n${traces.mkString("\n")}\n$whatHappened")
      // Logback's lines start HH:mm:ss.SSS; the rest of stderr is fleetsim's own, said once.
      val perSecond = stderr.linesIterator.collect { case LogLine(second) => second }.toSeq.groupBy(identity).view.mapValues(_.size)
      for (second, lines) <- perSecond.maxByOption(_._2) do
        assert(lines <= reasons.size,
          s"$lines log lines in the second $second, more than one for each of ${reasons.mkString(", ")}; $whatHappened")

    /** Every call of `kind` failed, for `reason` (or one of `collateral`: calls in flight on a
      * connection that another call's reply closed).
      */
    def counted(kind: String, reason: String, collateral: Set[String] = Set.empty): Unit =
      val m = messages(kind)
      assert(m.sent > 0, why)
      assert(m.ok == 0, s"$kind: ${m.ok} of ${m.sent} counted ok, failures ${m.failures}; $why")
      assert(m.failed == m.sent && m.failures.getOrElse(reason, 0L) > 0 && m.failures.keySet.subsetOf(collateral + reason),
        s"$kind: failures ${m.failures}, not $reason; $why")

    def allOk(kind: String): Unit =
      val m = messages(kind)
      assert(m.sent > 0 && m.ok == m.sent, s"$kind: sent ${m.sent}, ok ${m.ok}, failures ${m.failures}; $why")

    /** Every byte the server received, as Latin-1 (a byte a char). */
    lazy val receivedText: String = files.map(f => String(Files.readAllBytes(f), ISO_8859_1)).mkString("\n--\n")

    private def files: Seq[Path] =
      if !Files.isDirectory(received) then Nil else Files.list(received).iterator.asScala.toSeq.sortBy(_.getFileName.toString)

    /** The requests the server received on each connection; a request cut short by the end of its
      * connection is left out.
      */
    lazy val requests: Seq[Received] = files.flatMap { file =>
      val bytes = Files.readAllBytes(file)
      val text = String(bytes, ISO_8859_1)
      Iterator.unfold(0) { at =>
        val end = text.indexOf("\r\n\r\n", at)
        if end < 0 then None
        else
          val lines = text.substring(at, end).split("\r\n", -1).toSeq
          val length = lines.tail.collectFirst { case ContentLength(n) => n.toInt }.getOrElse(0)
          val body = bytes.slice(end + 4, end + 4 + length)
          Some(Received(file.getFileName.toString, lines.head, lines.tail, body) -> (end + 4 + length))
      }.toSeq
    }

    /** Each request the server received is one the profile says: a request line with a path
      * `paths` matches, of visible ASCII only; the headers fleetsim always sends, the profile's own
      * (`headers`), each a name and a value without control characters; a body without them.
      */
    def sentOnly(paths: scala.util.matching.Regex, headers: Set[String] = Set.empty): Unit =
      val allowed = (Set("Host", "User-Agent", "Content-Length", "Content-Type", "Connection") ++ headers).map(_.toLowerCase)
      val wrong = requests.flatMap { r =>
        val line = r.line match
          case RequestLine(path) if paths.matches(path) => None
          case other => Some(s"request line '${escape(other)}'")
        val heads = r.headers.flatMap {
          case HeaderLine(name, value) if allowed(name.toLowerCase) =>
            if name.equalsIgnoreCase("Host") && value != s"127.0.0.1:$port" then Some(s"Host '${escape(value)}'") else None
          case other => Some(s"header line '${escape(other)}'")
        }
        val body = Option.when(r.body.exists(b => (b & 0xff) < 0x20 || b == 0x7f))(s"a control byte in the body")
        (line ++ heads ++ body).map(w => s"$w in $r")
      }
      val received = requests.nonEmpty
      val unsaid = wrong.size
      assert(received, s"the server received no request; $where")
      assert(unsaid == 0,
        s"$unsaid things on the wire the profile did not say, like:\n${wrong.distinct.take(8).mkString("\n")}\n$where")

  private val RequestLine = """(?:GET|POST|PUT) (/[\x21-\x7e]*) HTTP/1\.1""".r
  private val HeaderLine = """([A-Za-z0-9-]+): ([\x20-\x7e\t]*)""".r
  private val ContentLength = """(?i)content-length:\s*(\d{1,9})\s*""".r
  private val LogLine = """(\d\d:\d\d:\d\d)\.\d{3} .*""".r
  /** A line of a stack trace: a frame, its cause, its head (a class name and its message), or the error the JVM died of. */
  private val Trace =
    """\s+at [\w$.<>/]+\(.*|\s*\.\.\. \d+ more|Caused by: .*|Exception in thread .*|([a-z][\w$]*\.)+[A-Z][\w$]*(: .*)?|.*OutOfMemoryError.*""".r
