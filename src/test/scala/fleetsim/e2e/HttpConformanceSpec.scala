package fleetsim.e2e

import com.typesafe.config.{Config, ConfigFactory}
import fleetsim.run.{FleetRun, RunSettings}
import fleetsim.device.DeviceState.Reporting
import fleetsim.transport.ConnectionMode
import org.scalatest.BeforeAndAfterAll
import org.scalatest.concurrent.Eventually
import org.scalatest.time.{Millis, Seconds, Span}
import org.scalatest.wordspec.AnyWordSpec

import java.nio.file.{Files, Path}
import scala.collection.mutable.ListBuffer
import scala.concurrent.Await
import scala.concurrent.duration.*
import scala.util.Try

/** fleetsim's own HTTP/1.1 client (fleetsim.transport: Http1, PipelinedConnection, HttpTransport)
  * against real servers we did not write (HttpServers), each in the ways real servers end
  * connections: keep-alive, Connection: close on every reply, a short idle timeout with calls spaced
  * past it, a cap of requests a connection, chunked replies, HTTP/1.0, no pipelining; and TLS from
  * OpenSSL (nginx), where the client side is fleetsim's own too (TlsClientStage). Each server
  * variant x connection mode (shared, per-device, per-call) runs a small fleet and checks what a
  * user would: every device Reporting; the server's access log agreeing with the fleet's ok count,
  * and sent = ok + failed; no failures; no client socket left in CLOSE-WAIT.
  */
class HttpConformanceSpec extends AnyWordSpec with Eventually with BeforeAndAfterAll:
  override given patienceConfig: PatienceConfig = PatienceConfig(Span(4, Seconds), Span(50, Millis))

  private val Devices = 20
  private val dir = Files.createTempDirectory("fleetsim-conformance")

  /** One way of running a server. `static`: it serves files, so devices speak static.conf (GET only)
    * rather than api.conf. `spaced`: its idle timeout is 1 s, so each device calls every 2.5 s.
    */
  private final class Variant(val server: String, val variant: String, val static: Boolean, val spaced: Boolean = false,
      val tls: Boolean = false)(val start: () => HttpServer)

  /** A CA and a server certificate for 127.0.0.1 it signed, as MosquittoSpec makes them: nginx
    * serves with the one and verifies devices' certificates against the other; the fleet trusts the
    * CA and issues each device its own certificate from it.
    */
  private lazy val pki: Path =
    val pki = Files.createDirectories(dir.resolve("pki"))
    val ca = fleetsim.tls.CertificateAuthority.create("conformance CA")
    fleetsim.tls.Pem.write(ca.material, pki.resolve("ca.pem"), Some(pki.resolve("ca.key")))
    fleetsim.tls.Pem.write(ca.issueServer(Seq("127.0.0.1")), pki.resolve("server.pem"), Some(pki.resolve("server.key")))
    pki

  private val variants = Seq(
    Variant("nginx", "keep-alive", static = true)(() => HttpServers.nginx("")),
    Variant("nginx", "Connection: close on every reply (keepalive_timeout 0)", static = true)(() => HttpServers.nginx("keepalive_timeout 0;")),
    Variant("nginx", "1 s idle timeout", static = true, spaced = true)(() => HttpServers.nginx("keepalive_timeout 1s;")),
    Variant("nginx", "3 requests a connection (keepalive_requests 3)", static = true)(() => HttpServers.nginx("keepalive_requests 3;")),
    // A device's own certificate where its connection is its own (not on shared connections): nginx checks it against the CA.
    Variant("nginx", "TLS (OpenSSL), each device's own certificate verified", static = true, tls = true)(() => HttpServers.nginx(
      s"ssl_certificate $pki/server.pem; ssl_certificate_key $pki/server.key; ssl_client_certificate $pki/ca.pem; ssl_verify_client optional;",
      listen = "ssl")),
    Variant("Apache httpd", "keep-alive", static = true)(() => HttpServers.apache("")),
    Variant("Apache httpd", "KeepAlive Off", static = true)(() => HttpServers.apache("KeepAlive Off")),
    Variant("Apache httpd", "MaxKeepAliveRequests 3", static = true)(() => HttpServers.apache("MaxKeepAliveRequests 3")),
    Variant("lighttpd", "1 s idle timeout (server.max-keep-alive-idle)", static = true, spaced = true)(
      () => HttpServers.lighttpd("server.max-keep-alive-idle = 1")),
    Variant("python http.server", "HTTP/1.0 replies, a connection each", static = true)(() => HttpServers.pythonHttpServer()),
    Variant("gunicorn", "sync workers: one request a connection, then Connection: close", static = false)(
      () => HttpServers.gunicorn("--worker-class", "sync")),
    Variant("gunicorn", "gthread workers, 1 s idle timeout (--keep-alive 1)", static = false, spaced = true)(
      () => HttpServers.gunicorn("--worker-class", "gthread", "--threads", "4", "--keep-alive", "1")),
    Variant("uvicorn", "keep-alive", static = false)(() => HttpServers.uvicorn()),
    Variant("uvicorn", "1 s idle timeout (--timeout-keep-alive 1)", static = false, spaced = true)(
      () => HttpServers.uvicorn("--timeout-keep-alive", "1")),
    Variant("Go net/http", "keep-alive, Content-Length", static = false)(() => HttpServers.go(chunked = false)),
    Variant("Go net/http", "keep-alive, chunked replies", static = false)(() => HttpServers.go(chunked = true)),
    Variant("Node http", "keep-alive, chunked replies", static = false)(() => HttpServers.node()))

  /** The server of the variant under test, kept for its three modes; one runs at a time. */
  private var running: Option[(Variant, HttpServer)] = None
  private def serverFor(variant: Variant): HttpServer = running match
    case Some((current, server)) if current eq variant => server
    case _ =>
      running.foreach(_._2.stop())
      running = None
      val server = variant.start()
      running = Some(variant -> server)
      server

  override def afterAll(): Unit = running.foreach(_._2.stop())

  /** The variant's profile as `mode` uses it, its calls tagged with the mode (see api.conf). */
  private def profile(variant: Variant, mode: ConnectionMode): String =
    val text = Files.readString(Path.of(getClass.getResource(s"/conformance/${if variant.static then "static" else "api"}.conf").toURI))
    // No jitter, and the first heartbeat 2.5 s after the join: each call comes 1.5 s after the server closed the idle
    // connection, never as it closes (a POST written then is lost, as curl's would be). With 0.5 s, a reply slowed half
    // a second by a busy machine put the next call there.
    val spacing =
      if variant.spaced then
        "messages.heartbeat { interval = 2500ms, jitter = 0, first = \"after 2500ms\" }\nmessages.stats.interval = 1h\n"
      else ""
    val file = Files.createTempFile(dir, s"profile-${mode.key}", ".conf")
    Files.writeString(file, s"$text\nconnection = ${mode.key}\nconstants.cell = \"${mode.key}\"\n$spacing").toString

  /** Two shared connections, so that the joins, all at once, go pipelined ten deep; where calls are
    * spaced past the server's idle timeout, a connection a device, each then as idle as a device's own:
    * calls crowd onto the first connection with room (docs/adr/0012), so only a pipelining of 1
    * spreads them one a connection. (gunicorn's gthread workers, among those, answer the first of
    * pipelined calls and drop the rest: docs/devices.md.) Over TLS, 5 s for a call: a fork's first
    * handshakes, 20 certificates issued, beside another suite, took more than 2 s once.
    */
  private def config(server: HttpServer, variant: Variant, mode: ConnectionMode, profile: String): Config =
    ConfigFactory.parseString(s"""
      fleetsim.device-profile = "$profile"
      fleetsim.controller.url = "${if variant.tls then "https" else "http"}://127.0.0.1:${server.port}"
      ${if variant.tls then s"""fleetsim.tls.ca-file = "$pki/ca.pem"""" else ""}
      ${if variant.tls && mode != ConnectionMode.Shared then s"""fleetsim.tls { client-ca = "$pki/ca.pem", client-ca-key = "$pki/ca.key" }""" else ""}
      fleetsim.fleet { devices = $Devices, ramp-rate = 1000 }
      fleetsim.http { request-timeout = ${if variant.tls then "5s" else "2s"}, ${if variant.spaced then s"max-connections = $Devices, pipelining = 1" else "max-connections = 2"} }
      fleetsim.device.backoff { min = 100ms, max = 1s }
      fleetsim.dashboard.enabled = off
      fleetsim.run.results-dir = "${Files.createTempDirectory(dir, "run")}"
      """).withFallback(ConfigFactory.load()).resolve()

  /** Client sockets to the server in CLOSE-WAIT throughout half a second: left there, not closing this instant. */
  private def leftInCloseWait(server: HttpServer): Set[String] =
    var left = server.clientsInCloseWait
    Try(eventually(timeout(Span(500, Millis))) { left = left intersect server.clientsInCloseWait; assert(left.isEmpty) })
    left

  // -Dconformance.servers=nginx,go runs only those servers' cells (the start of a name, any case).
  private val only = sys.props.get("conformance.servers").map(_.toLowerCase.split(',').map(_.trim).toSeq)
  private def selected(variant: Variant) = only.forall(_.exists(variant.server.toLowerCase.startsWith))
  // Go's server is built first: started now, the build is done by the time its cells come.
  if variants.exists(v => v.server.startsWith("Go") && selected(v)) then HttpServers.buildGo()
  for variant <- variants if selected(variant) do
    s"${variant.server} (${variant.variant})" should {
      for mode <- ConnectionMode.values do
        s"serve $Devices devices on connection = ${mode.key}" in cell(variant, mode)
    }

  /** Runs the fleet until every device is Reporting with two heartbeats each answered (one where calls are spaced), then checks
    * everything and fails once, saying all that is wrong: a cell that fails shows why.
    */
  private def cell(variant: Variant, mode: ConnectionMode): Unit =
    val server = serverFor(variant)
    val tag = s"cell=${mode.key} " // in the request line of each of this cell's calls the server logged
    val c = config(server, variant, mode, profile(variant, mode))
    val problems = ListBuffer.empty[String]
    var ok = 0L
    withSystem(c) {
      val run = Await.result(FleetRun.start(RunSettings(c)), 30.seconds)
      def reporting = run.metrics.devicesByState(Reporting)
      def heartbeats = run.metrics.snapshot().byKind("heartbeat").ok
      // Both take 1-4 s; the rest is room for a busy machine, spent only by a cell that fails. Spaced, each device's
      // first heartbeat already goes on a connection opened again after the server closed the idle one.
      val wanted = if variant.spaced then Devices else 2 * Devices
      val wait = if variant.spaced then 12.seconds else 10.seconds
      val ran = Try(eventually(timeout(Span(wait.toSeconds, Seconds)))(assert(reporting == Devices && heartbeats >= wanted)))
      if ran.isFailure then
        val states = run.metrics.devicesByState.filter(_._2 > 0).map((s, n) => s"$s $n").mkString(", ")
        problems += s"after ${wait.toSeconds} s, $reporting of $Devices devices Reporting ($states) and $heartbeats heartbeats answered ($wanted wanted)"
      val running = leftInCloseWait(server)
      if running.nonEmpty then problems += s"${running.size} client sockets left in CLOSE-WAIT while running"

      val summary = Await.result(run.finish("test over"), 60.seconds)
      val atEnd = leftInCloseWait(server)
      if atEnd.nonEmpty then problems += s"${atEnd.size} client sockets left in CLOSE-WAIT at the end"
      val counts = summary.messages.values
      val (sent, failed, forbidden) = (counts.map(_.sent).sum, counts.map(_.failed).sum, counts.map(_.forbidden).sum)
      ok = counts.map(_.ok).sum
      if sent != ok + failed then problems += s"sent $sent != ok $ok + failed $failed"
      val failures = for (kind, m) <- summary.messages.toSeq; (reason, n) <- m.failures if n > 0 yield s"$kind $reason $n"
      if failures.nonEmpty || forbidden > 0 then problems += s"failures: ${failures.mkString(", ")}${if forbidden > 0 then s", 403 $forbidden" else ""}"
    }
    // Counted once the fleet's sockets are closed: nginx logs a request it lingers over only then. And
    // lighttpd writes its access log every 4 s.
    Try(eventually(timeout(Span(5, Seconds)))(assert(server.served(tag) == ok)))
    val served = server.served(tag)
    if served != ok then problems += s"the server logged $served requests, the fleet counted $ok ok"
    if !server.isAlive then problems += s"the server stopped:\n${server.output}"
    if problems.nonEmpty then fail(s"${variant.server} (${variant.variant}), connection = ${mode.key}: ${problems.mkString("; ")}")
