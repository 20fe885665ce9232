package fleetsim.e2e

import com.typesafe.config.ConfigFactory
import fleetsim.run.{FleetRun, RunSettings}
import org.scalatest.BeforeAndAfterAll
import org.scalatest.concurrent.Eventually
import org.scalatest.time.{Millis, Seconds, Span}
import org.scalatest.wordspec.AnyWordSpec

import java.nio.file.Files
import scala.concurrent.Await
import scala.concurrent.duration.*
import scala.jdk.CollectionConverters.*

/** `--seed`: a fleet run twice with one seed sends the same generated values, device by device, as
  * nginx's access log shows; another seed sends others.
  */
class SeedSpec extends AnyWordSpec with Eventually with BeforeAndAfterAll:
  private val Devices = 10
  private lazy val nginx = HttpServers.nginx("")
  override def afterAll(): Unit = nginx.stop()

  /** A static site's device whose heartbeat carries a value drawn each time, tagged with its run. */
  private def profile(run: String): String =
    val file = Files.createTempFile("fleetsim-seed", ".conf")
    Files.writeString(file, s"""name = "seeded"
      |join { path = "/join.txt?run=$run" }
      |messages.heartbeat {
      |  interval = 200ms
      |  path = "/d/c0ffee/heartbeat.txt?run=$run&mac={{mac}}&v={{randomInt(1, 1000000000)}}"
      |}
      |""".stripMargin).toString

  /** Runs the fleet with `seed` until each device has sent three heartbeats (five rounds in all: their
    * phases are within one); each device's first three values, in the order nginx logged them.
    */
  private def valuesOf(run: String, seed: Long): Map[String, Seq[String]] =
    val c = ConfigFactory.parseString(s"""
      fleetsim.device-profile = "${profile(run)}"
      fleetsim.controller.url = "http://127.0.0.1:${nginx.port}"
      fleetsim.fleet { devices = $Devices, ramp-rate = 1000 }
      fleetsim.run { seed = $seed, results-dir = "${Files.createTempDirectory("fleetsim-seed")}" }
      fleetsim.dashboard.enabled = off
      """).withFallback(ConfigFactory.load()).resolve()
    withSystem(c) {
      val fleet = Await.result(FleetRun.start(RunSettings(c)), 30.seconds)
      eventually(timeout(Span(20, Seconds)), interval(Span(100, Millis)))(assert(fleet.metrics.snapshot().byKind("heartbeat").ok >= 5 * Devices))
      Await.result(fleet.finish("test over"), 30.seconds)
    }
    val line = s"""heartbeat.txt\\?run=$run&mac=([^&]+)&v=(\\d+) """.r.unanchored
    eventually(timeout(Span(5, Seconds)))(assert(nginx.served(s"run=$run&") >= 5 * Devices)) // nginx writes as it closes
    Files.readAllLines(nginx.home.resolve("access.log")).asScala.toSeq
      .collect { case line(mac, v) => mac -> v }.groupMap(_._1)(_._2).view.mapValues(_.take(3)).toMap

  "A run's --seed" should {
    "make a fleet send the same generated values again, device by device, and another seed others" in {
      val first = valuesOf("first", seed = 7)
      assert(first.size == Devices && first.values.forall(_.size == 3), first)
      assert(valuesOf("again", seed = 7) == first)
      val other = valuesOf("other", seed = 8)
      assert(other.keySet == first.keySet && first.keySet.forall(mac => other(mac) != first(mac)))
    }
  }
