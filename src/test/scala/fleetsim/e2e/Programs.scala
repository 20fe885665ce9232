package fleetsim.e2e

import org.scalatest.Assertions.{assert, fail}

import java.nio.file.{Files, Path}
import java.util.concurrent.TimeUnit

/** Programs outside the JVM that tests drive, each from a Debian package that `./test` installs.
  * A test that finds one missing fails with one line saying what to install, not deep in a driver.
  */
object Programs:
  def require(name: String, path: String, debianPackage: String): Path =
    val program = Path.of(path)
    if !Files.isExecutable(program) then
      fail(s"$name is missing ($path): install $debianPackage, or run ./test, which installs it")
    program

  /** Runs `command` to its end (30 s at most), which must succeed; its output in the failure if not. */
  def run(command: String*): Unit =
    val process = ProcessBuilder(command*).redirectErrorStream(true).start()
    val output = String(process.getInputStream.readAllBytes())
    assert(process.waitFor(30, TimeUnit.SECONDS) && process.exitValue == 0, s"${command.mkString(" ")}: $output")

  def sshd: Path = require("OpenSSH's sshd", "/usr/sbin/sshd", "openssh-server")
  def ssh: Path = require("OpenSSH's ssh", "/usr/bin/ssh", "openssh-client")
  def sshKeygen: Path = require("OpenSSH's ssh-keygen", "/usr/bin/ssh-keygen", "openssh-client")
  def chromium: Path = require("Chromium", "/usr/bin/chromium", "chromium")
  def chromedriver: Path = require("ChromeDriver", "/usr/bin/chromedriver", "chromium-driver")
  def openssl: Path = require("OpenSSL", "/usr/bin/openssl", "openssl")
  def mosquitto: Path = require("mosquitto", "/usr/sbin/mosquitto", "mosquitto")
  def mosquittoPasswd: Path = require("mosquitto_passwd", "/usr/bin/mosquitto_passwd", "mosquitto")
  // HttpConformanceSpec's servers.
  def nginx: Path = require("nginx", "/usr/sbin/nginx", "nginx")
  def apache: Path = require("Apache httpd", "/usr/sbin/apache2", "apache2")
  def lighttpd: Path = require("lighttpd", "/usr/sbin/lighttpd", "lighttpd")
  def gunicorn: Path = require("gunicorn", "/usr/bin/gunicorn", "gunicorn")
  def uvicorn: Path = require("uvicorn", "/usr/bin/uvicorn", "uvicorn")
  def node: Path = require("Node.js", "/usr/bin/node", "nodejs")
  def python3: Path = require("Python 3", "/usr/bin/python3", "python3")
  /** Go from go.dev's tarball (/usr/local/go) or on the PATH, else Debian's. */
  def go: Path =
    val onPath = sys.env.getOrElse("PATH", "").split(':').filter(_.nonEmpty).map(d => s"$d/go")
    (("/usr/local/go/bin/go" +: onPath).map(Path.of(_)).find(Files.isExecutable)).getOrElse(require("Go", "/usr/bin/go", "golang-go"))
