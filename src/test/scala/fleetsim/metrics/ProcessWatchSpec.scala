package fleetsim.metrics

import org.scalatest.funsuite.AnyFunSuite
import org.scalatest.matchers.should.Matchers

import java.net.{InetAddress, ServerSocket}

/** The open files the status line shows follow the sockets this process holds. */
class ProcessWatchSpec extends AnyFunSuite with Matchers:
  test("open files rise by the sockets opened and fall when they are closed"):
    val before = ProcessWatch.openFiles.get
    val sockets = Seq.fill(200)(ServerSocket(0, 1, InetAddress.getLoopbackAddress))
    val open = ProcessWatch.openFiles.get
    sockets.foreach(_.close())
    val after = ProcessWatch.openFiles.get
    // Other threads of the test JVM may open or close a file or two meanwhile.
    (open - before) shouldBe 200L +- 5L
    (open - after) shouldBe 200L +- 5L
