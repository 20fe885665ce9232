package fleetsim.controller

import com.github.plokhotnyuk.jsoniter_scala.core.readFromString
import com.typesafe.config.ConfigFactory
import fleetsim.controller.ControllerRoutes.given
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

    "answer a loopback caller whatever X-Forwarded-For or X-Real-Ip claim, and record the socket's address as the device's" in
      withController { (controller, call) =>
        assert(call("GET", "/admin/counts", "", Seq("X-Forwarded-For" -> "10.0.0.1")).statusCode == 200)
        assert(call("GET", "/admin/counts", "", Seq("X-Real-Ip" -> "10.0.0.1")).statusCode == 200)
        assert(call("GET", "/admin/counts", "", Seq("Forwarded" -> "for=10.0.0.1")).statusCode == 200)
        assert(call("POST", "/admin/config/bump", "", Seq("X-Forwarded-For" -> "10.0.0.1")).statusCode == 200)
        val join = """{"mac":"02:00:00:00:00:2c","serial":"FS44","model":"FS-AP-100","firmware":"1.0.0"}"""
        assert(call("POST", "/api/v1/join", join, Seq("X-Forwarded-For" -> "10.0.0.1", "X-Real-Ip" -> "10.0.0.2")).statusCode == 200)
        assert(controller.registry.find("02:00:00:00:00:2c").map(_.address).contains("127.0.0.1"))
      }

    "refuse an admin call that changes state from a browser page of another origin, and take it from its own or from a script" in
      withController { (controller, call) =>
        val own = controller.url // http://127.0.0.1:PORT, the origin of a page this controller served
        def seq = controller.counts.configSeq
        def refused(method: String, path: String, body: String, headers: (String, String)*) =
          val before = seq
          val reply = call(method, path, body, headers)
          assert(reply.statusCode == 403, s"$method $path with $headers answered ${reply.statusCode}")
          assert(reply.body.nonEmpty && !reply.body.contains('\n'), s"one line, not: ${reply.body}")
          assert(seq == before, s"$method $path with $headers changed the config seq")
        refused("POST", "/admin/config/bump", "", "Origin" -> "http://evil.example")
        refused("POST", "/admin/config/bump", "", "Origin" -> s"http://evil.example:${controller.address.getPort}") // rebound to 127.0.0.1
        refused("POST", "/admin/config/bump", "", "Origin" -> "null")
        refused("POST", "/admin/config/bump", "", "Origin" -> s"http://localhost:${controller.address.getPort}") // another origin
        refused("POST", "/admin/config/bump", "", "Sec-Fetch-Site" -> "cross-site")
        refused("POST", "/admin/config/bump", "", "Sec-Fetch-Site" -> "same-site", "Origin" -> own)
        refused("PUT", "/admin/faults", """{"latencyMs":5000}""", "Origin" -> "http://evil.example")
        assert(readFromString[Faults](call("GET", "/admin/faults", "", Nil).body) == Faults())
        assert(call("GET", "/admin/counts", "", Seq("Origin" -> "http://evil.example")).statusCode == 200) // reads stay as they were

        val start = seq
        assert(call("POST", "/admin/config/bump", "", Seq("Origin" -> own)).statusCode == 200)
        assert(call("POST", "/admin/config/bump", "", Seq("Origin" -> own, "Sec-Fetch-Site" -> "same-origin")).statusCode == 200)
        assert(call("POST", "/admin/config/bump", "", Nil).statusCode == 200) // curl, scripts, the SSH gateways
        assert(seq == start + 3)
      }
  }

  /** A controller on 127.0.0.1, port 0, and a call to it over a real socket with the headers given. */
  private def withController(test: (Controller, (String, String, String, Seq[(String, String)]) => HttpResponse[String]) => Unit): Unit =
    val config = ConfigFactory.parseString(s"""fleetsim.controller.state-dir = "${java.nio.file.Files.createTempDirectory("fleetsim-controller")}"""")
      .withFallback(ConfigFactory.load()).resolve()
    withSystem(config) {
      val controller = Await.result(Controller.start(ControllerSettings(config)), 10.seconds)
      val http = HttpClient.newBuilder().connectTimeout(java.time.Duration.ofSeconds(5)).build()
      def call(method: String, path: String, body: String, headers: Seq[(String, String)]): HttpResponse[String] =
        val request = headers.foldLeft(HttpRequest.newBuilder(URI(controller.url + path)).timeout(java.time.Duration.ofSeconds(10))) {
          case (builder, (name, value)) => builder.header(name, value)
        }
        http.send(request.method(method, HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofString())
      try test(controller, call)
      finally Await.result(controller.stop(), 10.seconds)
    }
