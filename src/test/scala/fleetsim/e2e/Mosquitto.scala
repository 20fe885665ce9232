package fleetsim.e2e

import org.scalatest.Assertions.assert
import org.scalatest.concurrent.Eventually.*
import org.scalatest.time.{Millis, Seconds, Span}

import java.net.{InetSocketAddress, Socket}
import java.nio.file.{Files, Path}
import scala.jdk.CollectionConverters.*

/** Debian's mosquitto in its own process, with `settings` under a listener on a free loopback port,
  * its files (config, log) in a folder of its own below `dir`; up, and taking connections, once made.
  */
final class Mosquitto(dir: Path, settings: String):
  val port: Int = freePort()
  private val home = Files.createTempDirectory(dir, "broker")
  val log: Path = home.resolve("mosquitto.log")
  private val conf = Files.writeString(home.resolve("mosquitto.conf"),
    s"""listener $port 127.0.0.1
       |user ${System.getProperty("user.name")}
       |persistence false
       |log_dest file $log
       |log_type all
       |connection_messages true
       |$settings
       |""".stripMargin)
  private var process = start()

  private def start(): Process =
    val p = ProcessBuilder(Programs.mosquitto.toString, "-c", conf.toString).redirectErrorStream(true)
      .redirectOutput(home.resolve("out.txt").toFile).start()
    eventually(timeout(Span(60, Seconds)), interval(Span(100, Millis))) {
      assert(p.isAlive, Files.readString(home.resolve("out.txt")))
      val probe = Socket()
      try probe.connect(InetSocketAddress("127.0.0.1", port), 1000) finally probe.close()
    }
    p

  def restart(): Unit =
    process.destroyForcibly().waitFor()
    process = start()

  def stop(): Unit = process.destroyForcibly().waitFor()

  /** Stops the broker's process (SIGSTOP): the kernel still takes connections into its backlog, but
    * nothing answers them; `resume` lets it go on.
    */
  def pause(): Unit = Programs.run("kill", "-STOP", process.pid.toString)
  def resume(): Unit = Programs.run("kill", "-CONT", process.pid.toString)

  /** Connections to the broker open or opening now from the local address `from`, counted from the
    * clients' ends in /proc/net/tcp and tcp6 (a JVM's sockets are IPv6 ones, to 127.0.0.1 mapped):
    * connected or sending SYN; a closing socket no longer counts. A fleet calling from an address of
    * its own (--source-ips) is then counted alone: no other client, in this process or another, can
    * add to it, even one still calling a port this broker now has.
    */
  def clientConnections(from: String): Int = clientSockets(from).size

  /** The sockets [[clientConnections]] counts, by inode. The kernel lists them a page at a time, so
    * one listing is not one instant: on a busy machine with many sockets it can show a socket that
    * closed while it was being read beside one opened later. Only a socket seen in two listings some
    * time apart was surely open beside the others seen in both.
    */
  def clientSockets(from: String): Set[String] =
    val local = java.net.InetAddress.getByName(from).getAddress.reverse.map(b => f"${b & 0xff}%02X").mkString + ":" // /proc's byte order
    val remote = f":$port%04X"
    Seq("tcp", "tcp6").flatMap(f => Files.readAllLines(Path.of("/proc/net", f)).asScala.drop(1)).map(_.trim.split("\\s+")).collect {
      case f if f(1).contains(local) && f(2).endsWith(remote) && (f(3) == "01" || f(3) == "02") => f(9)
    }.toSet

  /** The user names the broker logged its clients in with (`u'NAME'` on each new connection). */
  def identities: Set[String] =
    Files.readAllLines(log).asScala.flatMap(l => "u'([^']*)'".r.findFirstMatchIn(l).map(_.group(1))).toSet

object Mosquitto:
  /** mosquitto with `settings`, stopped whatever `test` does. */
  def around(dir: Path, settings: String)(test: Mosquitto => Unit): Unit =
    val broker = Mosquitto(dir, settings)
    try test(broker) finally broker.stop()

  /** A password file of these users and passwords, hashed as mosquitto reads it (`password_file`). */
  def passwordFile(dir: Path, users: Seq[(String, String)]): Path =
    val passwords = Files.createTempFile(dir, "passwd", "")
    Files.writeString(passwords, users.map((user, password) => s"$user:$password\n").mkString)
    val hashed = ProcessBuilder(Programs.mosquittoPasswd.toString, "-U", passwords.toString).redirectErrorStream(true).start()
    assert(hashed.waitFor() == 0, String(hashed.getInputStream.readAllBytes()))
    passwords
