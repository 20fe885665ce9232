package fleetsim.e2e

import com.typesafe.config.Config
import org.apache.pekko.actor.typed.{ActorSystem, SpawnProtocol}

import scala.concurrent.Await
import scala.concurrent.duration.*

/** A loopback port free now, for a server the test starts (or tells to start, or starts again) on it.
  * Below the kernel's ephemeral range (32768-60999 here), where no port-0 bind nor outgoing connection
  * of another suite lands: CI once saw a controller, stopped to be restarted on its port, lose it to
  * a server another suite bound to port 0, which then took the first one's devices' TLS hellos.
  */
def freePort(): Int =
  val random = java.util.concurrent.ThreadLocalRandom.current()
  Iterator.continually(random.nextInt(20000, 32768)).map { port =>
    try
      val socket = java.net.ServerSocket(port, 1, java.net.InetAddress.getLoopbackAddress)
      try Some(port) finally socket.close()
    catch case _: java.io.IOException => None // taken: another
  }.collectFirst { case Some(port) => port }.get

/** A config file (`--config`) for a fleet run in a child JVM, whose devices turned away by a busy
  * controller (a cold start, a ramp beside other suites) come back within 3 s, not the default's 60,
  * so that a test's deadlines hold.
  */
lazy val quickBackoff: String =
  val file = java.nio.file.Files.createTempFile("fleetsim-quick-backoff", ".conf")
  java.nio.file.Files.writeString(file, "fleetsim.device.backoff.max = 3s\n")
  file.toString

/** Deletes `dir` and all under it. */
def deleteTree(dir: java.nio.file.Path): Unit =
  scala.util.Using.resource(java.nio.file.Files.walk(dir))(_.sorted(java.util.Comparator.reverseOrder()).forEach(java.nio.file.Files.delete))

/** An actor system for one test, terminated whatever the test does. */
def withSystem(config: Config)(test: ActorSystem[SpawnProtocol.Command] ?=> Unit): Unit =
  val system = ActorSystem(SpawnProtocol(), "e2e", config)
  try test(using system)
  finally
    system.terminate()
    Await.result(system.whenTerminated, 30.seconds)
