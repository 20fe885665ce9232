package fleetsim.e2e

import org.scalatest.Assertions.fail

import java.nio.file.{Files, Path}

/** Programs outside the JVM that tests drive, each from a Debian package that `./test` installs.
  * A test that finds one missing fails with one line saying what to install, not deep in a driver.
  */
object Programs:
  def require(name: String, path: String, debianPackage: String): Path =
    val program = Path.of(path)
    if !Files.isExecutable(program) then
      fail(s"$name is missing ($path): install $debianPackage, or run ./test, which installs it")
    program

  def sshd: Path = require("OpenSSH's sshd", "/usr/sbin/sshd", "openssh-server")
  def ssh: Path = require("OpenSSH's ssh", "/usr/bin/ssh", "openssh-client")
  def sshKeygen: Path = require("OpenSSH's ssh-keygen", "/usr/bin/ssh-keygen", "openssh-client")
  def chromium: Path = require("Chromium", "/usr/bin/chromium", "chromium")
  def chromedriver: Path = require("ChromeDriver", "/usr/bin/chromedriver", "chromium-driver")
  def openssl: Path = require("OpenSSL", "/usr/bin/openssl", "openssl")
  def mosquitto: Path = require("mosquitto", "/usr/sbin/mosquitto", "mosquitto")
  def mosquittoPasswd: Path = require("mosquitto_passwd", "/usr/bin/mosquitto_passwd", "mosquitto")
