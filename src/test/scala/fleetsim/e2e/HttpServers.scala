package fleetsim.e2e

import org.scalatest.Assertions.{assert, fail}
import org.scalatest.concurrent.Eventually.*
import org.scalatest.time.{Millis, Seconds, Span}

import java.nio.file.attribute.PosixFilePermissions
import java.nio.file.{Files, Path}
import java.util.concurrent.{CompletableFuture, TimeUnit}
import scala.jdk.CollectionConverters.*
import scala.util.Try

/** Real HTTP servers we did not write, for HttpConformanceSpec: each a child process on 127.0.0.1 and
  * a free port, in a folder of its own, writing an access log of one line a request it served.
  * Static servers serve the files of [[HttpServers.Site]] (GET only); application servers answer
  * the API of conformance/api.conf with src/test/resources/conformance's app.py, server.go or server.js.
  */
final class HttpServer private[e2e] (val name: String, val port: Int, val home: Path, accessLog: Path, process: Process):
  private val stopAtExit = Thread(() => stop())
  Runtime.getRuntime.addShutdownHook(stopAtExit) // a test JVM stopped mid-test leaves no server behind

  /** Requests it logged whose request line holds `text` (the cell's tag). */
  def served(text: String): Int =
    if !Files.exists(accessLog) then 0 else Files.readAllLines(accessLog).asScala.count(_.contains(text))

  def isAlive: Boolean = process.isAlive

  /** The server's own output and error log, last lines, for a failure's clue. */
  def output: String =
    Files.list(home).iterator.asScala.filter(f => f.toString.endsWith(".txt") || f.endsWith("error.log")).toSeq
      .flatMap(f => Files.readAllLines(f).asScala.takeRight(10).map(l => s"${f.getFileName}: $l")).mkString("\n")

  /** Client sockets to this server in CLOSE-WAIT (the server closed, the client has not), from
    * /proc/net/tcp and tcp6 (a JVM's sockets are IPv6 ones to a mapped 127.0.0.1): their local
    * address and inode, which tell one socket from a later one on the same port.
    */
  def clientsInCloseWait: Set[String] =
    val remote = f":$port%04X"
    Seq("tcp", "tcp6").flatMap(f => Files.readAllLines(Path.of("/proc/net", f)).asScala.drop(1)).map(_.trim.split("\\s+"))
      .collect { case f if f(2).endsWith(remote) && f(3) == "08" => s"${f(1)}#${f(9)}" }.toSet

  /** SIGTERM (which stops its workers too), SIGKILL after 10 s; then SIGKILL to any worker left. Idempotent. */
  def stop(): Unit =
    val workers = process.descendants.iterator.asScala.toList
    process.destroy()
    if !process.waitFor(10, TimeUnit.SECONDS) then process.destroyForcibly().waitFor()
    workers.filter(_.isAlive).foreach { w => w.destroyForcibly(); w.onExit.get(10, TimeUnit.SECONDS) }
    try Runtime.getRuntime.removeShutdownHook(stopAtExit) catch case _: IllegalStateException => () // shutting down already

object HttpServers:
  /** The files static servers serve: what conformance/static.conf asks for. */
  val Site: Map[String, String] =
    Map("join.txt" -> "token: c0ffee\n", "d/c0ffee/heartbeat.txt" -> "ok\n", "d/c0ffee/stats.txt" -> "ok\n")

  /** In /tmp, not the suite's temporary folder under target/: Apache's workers (www-data) must enter
    * every folder above what they serve, and a checkout under /root or a 0750 home is closed to them.
    * Removed when the tests' JVM exits.
    */
  private val root =
    val made = Files.createTempDirectory(Path.of("/tmp"), "fleetsim-http-servers",
      PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwxr-xr-x")))
    Runtime.getRuntime.addShutdownHook(Thread((() => Try(deleteTree(made))): Runnable))
    made
  private def resource(name: String): Path = Path.of(getClass.getResource(s"/conformance/$name").toURI)

  /** Where a server writes its access log: a file its configuration names, or its stdout or stderr. */
  private enum Logs:
    case ToFile, ToStdout, ToStderr

  /** The one shape every server starts by: a folder readable by a server's unprivileged workers
    * (Apache's www-data) with the site in www/, a free port, the command `setup` gives for the
    * folder, the port and the access log, and a wait, 10 s at most, until it listens — seen in
    * /proc/net/tcp, not by connecting, which some servers would log.
    */
  private def launch(name: String, logs: Logs = Logs.ToFile)(setup: (Path, Int, Path) => Seq[String]): HttpServer =
    val home = Files.createTempDirectory(root, name, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwxr-xr-x")))
    for (file, text) <- Site do
      Files.createDirectories(home.resolve("www").resolve(file).getParent)
      Files.writeString(home.resolve("www").resolve(file), text)
    val port = freePort()
    val accessLog = home.resolve("access.log")
    val command = setup(home, port, accessLog)
    val builder = ProcessBuilder(command*).directory(home.toFile)
      .redirectOutput((if logs == Logs.ToStdout then accessLog else home.resolve("out.txt")).toFile)
      .redirectError((if logs == Logs.ToStderr then accessLog else home.resolve("err.txt")).toFile)
    builder.environment.putAll(Map("PYTHONUNBUFFERED" -> "1", "PYTHONDONTWRITEBYTECODE" -> "1").asJava) // log lines as they come; no __pycache__
    val server = HttpServer(name, port, home, accessLog, builder.start())
    val settled = Try(eventually(timeout(Span(10, Seconds)), interval(Span(50, Millis)))(assert(listening(port) || !server.isAlive)))
    if settled.isFailure || !listening(port) then
      server.stop()
      fail(s"$name did not listen on 127.0.0.1:$port: ${command.mkString(" ")}\n${server.output}")
    server

  private def listening(port: Int): Boolean =
    val local = f"0100007F:$port%04X"
    Files.readAllLines(Path.of("/proc/net/tcp")).asScala.exists(l => l.contains(local) && l.trim.split("\\s+")(3) == "0A")

  /** nginx serving the site; `settings` go in its server block (keepalive_timeout 0, ...), `listen`
    * after its address (ssl).
    */
  def nginx(settings: String, listen: String = ""): HttpServer = launch("nginx") { (home, port, access) =>
    val temp = Seq("client_body", "proxy", "fastcgi", "uwsgi", "scgi").map(t => s"${t}_temp_path $home/$t;").mkString(" ")
    val conf = Files.writeString(home.resolve("nginx.conf"),
      s"""daemon off;
         |user root;
         |worker_processes 1;
         |pid $home/nginx.pid;
         |error_log $home/error.log;
         |events { worker_connections 1024; }
         |http {
         |  access_log $access;
         |  $temp
         |  server {
         |    listen 127.0.0.1:$port $listen;
         |    root $home/www;
         |    $settings
         |  }
         |}
         |""".stripMargin)
    // -e: the error log before the configuration is read (else /var/log/nginx/error.log).
    Seq(Programs.nginx.toString, "-p", home.toString, "-c", conf.toString, "-e", s"$home/error.log")
  }

  /** Apache httpd (event MPM) serving the site; its workers run as www-data, as root may not serve. */
  def apache(settings: String): HttpServer = launch("apache") { (home, port, access) =>
    val modules = "/usr/lib/apache2/modules"
    val conf = Files.writeString(home.resolve("httpd.conf"),
      s"""ServerRoot $home
         |ServerName 127.0.0.1
         |Listen 127.0.0.1:$port
         |LoadModule mpm_event_module $modules/mod_mpm_event.so
         |LoadModule authz_core_module $modules/mod_authz_core.so
         |User www-data
         |Group www-data
         |PidFile $home/httpd.pid
         |DefaultRuntimeDir $home
         |ErrorLog $home/error.log
         |LogFormat "%h %l %u %t \\"%r\\" %>s %b" common
         |CustomLog $access common
         |DocumentRoot $home/www
         |<Directory $home/www>
         |  Require all granted
         |</Directory>
         |$settings
         |""".stripMargin)
    Seq(Programs.apache.toString, "-f", conf.toString, "-DFOREGROUND")
  }

  /** lighttpd serving the site. It writes its access log every 4 s (or 8 KiB). */
  def lighttpd(settings: String): HttpServer = launch("lighttpd") { (home, port, access) =>
    val conf = Files.writeString(home.resolve("lighttpd.conf"),
      s"""server.document-root = "$home/www"
         |server.bind = "127.0.0.1"
         |server.port = $port
         |server.errorlog = "$home/error.log"
         |server.modules = ("mod_accesslog")
         |accesslog.filename = "$access"
         |$settings
         |""".stripMargin)
    Seq(Programs.lighttpd.toString, "-D", "-f", conf.toString)
  }

  /** Python's http.server serving the site: HTTP/1.0 replies, a connection each. It logs each
    * request to stderr.
    */
  def pythonHttpServer(): HttpServer = launch("python-http.server", Logs.ToStderr) { (home, port, _) =>
    // http.server as `python3 -m http.server` runs it, but with a listen backlog of 128 rather than socketserver's 5: twenty
    // devices connecting at once on a busy machine overflowed 5, and SYNs dropped twice outlast the 3 s connect-timeout.
    val main = "import runpy, socketserver, sys; socketserver.TCPServer.request_queue_size = 128; " +
      "sys.argv[0] = 'http.server'; runpy.run_module('http.server', run_name='__main__', alter_sys=True)"
    Seq(Programs.python3.toString, "-c", main, port.toString, "--bind", "127.0.0.1", "--directory", s"$home/www")
  }

  /** gunicorn running app.py's WSGI app with two workers; `options` pick the worker class and more. */
  def gunicorn(options: String*): HttpServer = launch("gunicorn") { (_, port, access) =>
    Seq(Programs.gunicorn.toString, "--bind", s"127.0.0.1:$port", "--workers", "2", "--graceful-timeout", "1",
      "--access-logfile", access.toString, "--chdir", resource("app.py").getParent.toString) ++ options :+ "app:wsgi"
  }

  /** uvicorn running app.py's ASGI app; it logs requests to stdout. */
  def uvicorn(options: String*): HttpServer = launch("uvicorn", Logs.ToStdout) { (_, port, _) =>
    Seq(Programs.uvicorn.toString, "--host", "127.0.0.1", "--port", port.toString, "--lifespan", "off",
      "--app-dir", resource("app.py").getParent.toString) ++ options :+ "app:asgi"
  }

  /** server.go, built once a test run into target/ (a first build with a cold Go cache takes 20-30 s of both cores here),
    * under `nice` and on a thread of its own from the first [[buildGo]]: a suite starts it early, and runs other servers'
    * tests meanwhile.
    */
  private lazy val goBuild: CompletableFuture[Path] = CompletableFuture.supplyAsync { () =>
    val binary = Path.of("target", "conformance", "go-server").toAbsolutePath
    Files.createDirectories(binary.getParent)
    val build = ProcessBuilder("nice", "-n", "10", Programs.go.toString, "build", "-o", binary.toString, resource("server.go").toString)
      .directory(binary.getParent.toFile).redirectErrorStream(true)
    build.environment.put("GOTOOLCHAIN", "local") // never download a toolchain
    val process = build.start()
    val output = String(process.getInputStream.readAllBytes())
    if !process.waitFor(5, TimeUnit.MINUTES) || process.exitValue != 0 then fail(s"go build of server.go failed: $output")
    binary
  }

  /** Starts building server.go, if it has not started yet. */
  def buildGo(): Unit = goBuild

  private def goBinary: Path =
    try goBuild.get(5, TimeUnit.MINUTES)
    catch case e: java.util.concurrent.ExecutionException => throw e.getCause

  /** Go's net/http answering the API; `chunked` flushes each reply before it ends, so it has no Content-Length. */
  def go(chunked: Boolean): HttpServer = launch("go") { (_, port, access) =>
    Seq(goBinary.toString, port.toString, access.toString, if chunked then "chunked" else "length")
  }

  /** Node's http module answering the API, every reply chunked. */
  def node(): HttpServer = launch("node") { (_, port, access) =>
    Seq(Programs.node.toString, resource("server.js").toString, port.toString, access.toString)
  }
