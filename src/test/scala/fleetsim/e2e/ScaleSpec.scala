package fleetsim.e2e

import com.typesafe.config.ConfigFactory
import fleetsim.controller.{Controller, ControllerSettings}
import fleetsim.report.Summary
import org.apache.pekko.actor.typed.ActorSystem
import org.apache.pekko.actor.typed.scaladsl.Behaviors
import org.scalatest.wordspec.AnyWordSpec

import java.nio.file.Files
import java.util.concurrent.TimeUnit
import scala.concurrent.Await
import scala.concurrent.duration.*
import scala.jdk.CollectionConverters.*

/** A fleet in a child JVM whose heap is capped at a fixed base plus a budget per device, against
  * the reference controller in this JVM: it must fit, and use no more threads at 20,000 devices
  * than at 200. (Speed and memory figures themselves are benchmarks: bench/scale.sh.)
  */
class ScaleSpec extends AnyWordSpec:
  /** The target for an HTTP device's heap (issue 5), and a base for the JVM, Pekko and the pool. */
  private val BytesPerDevice = 1000L
  private val BaseBytes = 64L << 20

  /** Starts a fleet in its own JVM; its summary once it has finished. */
  private def fleet(controllerUrl: String, devices: Int, duration: String): () => Summary =
    val results = Files.createTempDirectory("fleetsim-scale")
    val heapMiB = (BaseBytes + devices * BytesPerDevice) >> 20
    // A device the controller turned away while the ramp had it busy (503, overloaded: thousands on a
    // slow machine) is back within 3 s, not the default's 60, and Reporting before the run ends.
    val quickBackoff = Files.writeString(results.resolve("quick-backoff.conf"), "fleetsim.device.backoff.max = 3s\n")
    val command = ChildJvm.command(s"${heapMiB}m", options = Seq("-XX:+ExitOnOutOfMemoryError"), args = Seq(
      "run", "--controller", controllerUrl, "--devices", devices.toString, "--ramp-rate", "2000", "--config", quickBackoff.toString,
      "--duration", duration, "--dashboard", "off", "--results", results.toString))
    val process = ProcessBuilder(command.asJava).redirectErrorStream(true).redirectOutput(results.resolve("out.log").toFile).start()
    () =>
      assert(process.waitFor(120, TimeUnit.SECONDS), s"$devices devices did not finish")
      assert(process.exitValue == 0, s"$devices devices in ${heapMiB} MiB: ${Files.readString(results.resolve("out.log")).takeRight(2000)}")
      Summary.read(results.resolve("summary.json"))

  "A fleet of 20,000 devices" should {
    "fit a heap of 64 MiB plus 1,000 bytes a device, on as many threads as 200 devices" in {
      // 20,000 devices are up 10 s in, and each sends its heartbeats and its stats (within 11 s of
      // joining, jitter included) in that heap before the run's 25 s are over.
      val config = ConfigFactory.parseString("fleetsim.controller { heartbeat-interval = 5s, stats-interval = 10s }")
        .withFallback(ConfigFactory.load()).resolve()
      val system = ActorSystem(Behaviors.empty, "scale-controller", config)
      try
        val controller = Await.result(Controller.start(ControllerSettings(config))(using system), 10.seconds)
        // Side by side: a process's heap and threads are its own.
        val (startedSmall, startedLarge) = (fleet(controller.url, 200, "14s"), fleet(controller.url, 20000, "25s"))
        val small = startedSmall() // past its first stats (10 s): every kind of work a thread might start for
        val large = startedLarge()
        assert(small.devices.byState("Reporting") == 200)
        assert(large.devices.byState("Reporting") == 20000)
        assert(large.messages("heartbeat").ok >= 20000) // every device reported, in that heap
        assert(large.messages("stats").ok >= 20000)
        assert(large.process.threadsPeak <= small.process.threadsPeak + 2,
          s"${small.process.threadsPeak} threads at 200 devices, ${large.process.threadsPeak} at 20,000")
      finally
        system.terminate()
        Await.result(system.whenTerminated, 30.seconds)
    }
  }
