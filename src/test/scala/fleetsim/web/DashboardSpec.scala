package fleetsim.web

import com.typesafe.config.ConfigFactory
import fleetsim.run.{FleetRun, RunSettings}
import fleetsim.device.DeviceState.Reporting
import fleetsim.e2e.withSystem
import io.micrometer.prometheusmetrics.{PrometheusConfig, PrometheusMeterRegistry}
import org.scalatest.concurrent.Eventually
import org.scalatest.time.{Millis, Seconds, Span}
import org.scalatest.wordspec.AnyWordSpec

import java.net.URI
import java.net.http.{HttpClient, HttpRequest, HttpResponse}
import java.nio.file.Files
import java.util.concurrent.atomic.AtomicInteger
import scala.concurrent.duration.*
import scala.concurrent.{Await, Future}

/** The dashboard's control, `POST /api/devices/restart-stopped`, over a real socket on loopback;
  * CallerSpec has who it answers case by case.
  */
class DashboardSpec extends AnyWordSpec with Eventually:
  override given patienceConfig: PatienceConfig = PatienceConfig(Span(30, Seconds), Span(100, Millis))

  private val config = ConfigFactory.parseString(s"""
    fleetsim.fleet { devices = 5, ramp-rate = 1000 }
    fleetsim.controller.state-dir = "${Files.createTempDirectory("fleetsim-controller")}"
    fleetsim.run.results-dir = "${Files.createTempDirectory("fleetsim-dashboard")}"
    """).withFallback(ConfigFactory.load()).resolve()
  private val http = HttpClient.newBuilder().connectTimeout(java.time.Duration.ofSeconds(5)).build()

  private def call(url: String, method: String, headers: (String, String)*): HttpResponse[String] =
    val request = headers.foldLeft(HttpRequest.newBuilder(URI(url + "api/devices/restart-stopped")).timeout(java.time.Duration.ofSeconds(10))) {
      case (builder, (name, value)) => builder.header(name, value)
    }
    http.send(request.method(method, HttpRequest.BodyPublishers.noBody()).build(), HttpResponse.BodyHandlers.ofString())

  /** A dashboard on 127.0.0.1, port 0, whose restart says 3 devices were Stopped and counts how often it was asked. */
  private def withDashboard(test: (Dashboard, AtomicInteger) => Unit): Unit =
    withSystem(config) {
      val restarts = AtomicInteger()
      val dashboard = Await.result(Dashboard.start(DashboardSettings(enabled = true, "127.0.0.1", 0), "{}",
        PrometheusMeterRegistry(PrometheusConfig.DEFAULT), () => Future.successful { restarts.incrementAndGet(); 3L }), 10.seconds)
      test(dashboard, restarts)
    }

  "POST /api/devices/restart-stopped" should {
    "restart the stopped devices for a script or the dashboard's own page: 202 and how many were Stopped" in withDashboard { (dashboard, restarts) =>
      val own = dashboard.url.stripSuffix("/") // http://127.0.0.1:PORT, the origin of the pages it serves
      for headers <- Seq(Nil, Seq("Origin" -> own, "Sec-Fetch-Site" -> "same-origin")) do
        val reply = call(dashboard.url, "POST", headers*)
        assert(reply.statusCode == 202, reply.body)
        assert(reply.body == """{"restarting":3}""")
        assert(reply.headers.firstValue("Content-Type").get.startsWith("application/json"))
      assert(restarts.get == 2)
    }

    "refuse a page of another site or origin with 403, restarting nothing" in withDashboard { (dashboard, restarts) =>
      for headers <- Seq(Seq("Sec-Fetch-Site" -> "cross-site"), Seq("Sec-Fetch-Site" -> "same-site"), Seq("Origin" -> "http://evil.example"),
          Seq("Origin" -> "null")) do
        val reply = call(dashboard.url, "POST", headers*)
        assert(reply.statusCode == 403, s"$headers: ${reply.body}")
        assert(reply.body.startsWith("""{"error":"the dashboard's restart takes no POST from a page of another"""), reply.body)
      assert(call(dashboard.url, "GET").statusCode == 404) // only a POST restarts
      assert(restarts.get == 0)
    }

    "tell a run's fleet, and answer with its devices Stopped" in {
      withSystem(config) {
        val run = Await.result(FleetRun.start(RunSettings(config)), 30.seconds)
        eventually(assert(run.metrics.devicesByState(Reporting) == 5))
        val reply = call(run.dashboard.get.url, "POST")
        assert(reply.statusCode == 202 && reply.body == """{"restarting":0}""", reply.body)
        Await.result(run.finish("test over"), 60.seconds)
      }
    }
  }
