package fleetsim.controller

import com.typesafe.config.ConfigFactory
import fleetsim.e2e.{Admin, withSystem}

import java.net.URI
import java.net.http.{HttpClient, HttpRequest, HttpResponse}
import org.scalatest.wordspec.AnyWordSpec

import scala.concurrent.Await
import scala.concurrent.duration.*

/** The reference controller's own checks, over HTTP as devices call it. */
class ControllerSpec extends AnyWordSpec:
  "The reference controller" should {
    "count heartbeats from a second device with the MAC of one already reporting, and not a device that rebooted and joined again" in {
      val config = ConfigFactory.parseString(s"""fleetsim.controller.state-dir = "${java.nio.file.Files.createTempDirectory("fleetsim-controller")}"""")
        .withFallback(ConfigFactory.load()).resolve()
      withSystem(config) {
        val controller = Await.result(Controller.start(ControllerSettings(config)), 10.seconds)
        val http = HttpClient.newHttpClient()
        def post(path: String, body: String): Int =
          http.send(HttpRequest.newBuilder(URI(s"${controller.url}/api/v1/$path")).POST(HttpRequest.BodyPublishers.ofString(body)).build(),
            HttpResponse.BodyHandlers.discarding()).statusCode
        val mac = "02:00:00:00:00:2a"
        def join() = assert(post("join", s"""{"mac":"$mac","serial":"FS42","model":"FS-AP-100","firmware":"1.0.0"}""") == 200)
        def beat(seq: Int, uptimeS: Int) =
          assert(post(s"devices/$mac/heartbeat", s"""{"seq":$seq,"uptimeS":$uptimeS,"state":"Reporting","configSeq":1}""") == 200)
        join()
        beat(1, 600)
        beat(3, 603)
        beat(2, 601) // the same device's heartbeats, one overtaken by the next on its way
        assert(controller.counts.duplicates == 0)
        beat(1, 30) // another device with this MAC, booted about 10 minutes after the first
        assert(controller.counts.duplicates == 1)
        beat(4, 605) // both go on: each switch from the older to the younger shows
        beat(2, 32)
        assert(controller.counts.duplicates == 2)
        join() // a reboot: a new session, uptime from 0
        beat(1, 2)
        beat(2, 3)
        assert(controller.counts.duplicates == 2)
        Await.result(controller.stop(), 10.seconds)
      }
    }

    "hold each reply back by the latency injected through its admin API" in {
      val config = ConfigFactory.parseString(s"""fleetsim.controller.state-dir = "${java.nio.file.Files.createTempDirectory("fleetsim-controller")}"""")
        .withFallback(ConfigFactory.load()).resolve()
      withSystem(config) {
        val controller = Await.result(Controller.start(ControllerSettings(config)), 10.seconds)
        val admin = Admin(controller.url)
        val join = """{"mac":"02:00:00:00:00:2b","serial":"FS43","model":"FS-AP-100","firmware":"1.0.0"}"""
        admin.send("PUT", "/admin/faults", """{"latencyMs":250}""")
        val start = System.nanoTime()
        admin.send("POST", "/api/v1/join", join)
        assert(System.nanoTime() - start >= 250.millis.toNanos)
        Await.result(controller.stop(), 10.seconds)
      }
    }
  }
