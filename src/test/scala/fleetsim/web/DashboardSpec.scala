package fleetsim.web

import com.typesafe.config.ConfigFactory
import fleetsim.control.{RunAction, RunControl}
import fleetsim.run.{FleetRun, RunSettings}
import fleetsim.device.DeviceState.{Off, Reporting}
import fleetsim.report.Summary
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

/** The dashboard's controls, `/api/devices/target` and `/api/devices/restart-stopped`, over a real
  * socket on loopback; CallerSpec has who they answer case by case.
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
    send(url + "api/devices/restart-stopped", method, "", headers*)

  private def send(url: String, method: String, body: String, headers: (String, String)*): HttpResponse[String] =
    val request = headers.foldLeft(HttpRequest.newBuilder(URI(url)).timeout(java.time.Duration.ofSeconds(10))) {
      case (builder, (name, value)) => builder.header(name, value)
    }
    val publisher = if body.isEmpty then HttpRequest.BodyPublishers.noBody() else HttpRequest.BodyPublishers.ofString(body)
    http.send(request.method(method, publisher).build(), HttpResponse.BodyHandlers.ofString())

  /** A run of 10 planned devices that counts its restarts, says 3 devices were Stopped, and keeps the size (and how devices left) it is given. */
  private final class Counted extends RunControl:
    val restarts = AtomicInteger()
    @volatile var target = 10
    @volatile var left = fleetsim.control.Leave.Vanish
    def planned: Int = 10
    def resize(devices: Int, rate: Option[Double], leave: fleetsim.control.Leave): Either[String, Int] =
      if devices > planned then Left(s"at most $planned") else { target = devices; left = leave; Right(devices) }
    def act(action: RunAction, name: Option[String]): Future[Long] = Future.successful { restarts.incrementAndGet(); 3L }
    def stop(reason: String): Future[Summary] = Future.never

  /** A run of 5 devices, once all are Reporting: `test` gets it, the URL of `api` on its dashboard and
    * the joins the controller has counted; `atEnd` its summary.
    */
  private def withReportingRun(api: String, atEnd: Summary => Unit = _ => ())(test: (FleetRun, String, Long) => Unit): Unit =
    withSystem(config) {
      val run = Await.result(FleetRun.start(RunSettings(config)), 30.seconds)
      try
        eventually(assert(run.metrics.devicesByState(Reporting) == 5))
        test(run, run.dashboard.get.url + api, run.controller.get.counts.received("join"))
      finally atEnd(Await.result(run.finish("test over"), 60.seconds))
    }

  /** A dashboard on 127.0.0.1, port 0, controlling a [[Counted]] run. */
  private def withDashboard(test: (Dashboard, Counted) => Unit): Unit =
    withSystem(config) {
      val run = Counted()
      val dashboard = Await.result(Dashboard.start(DashboardSettings(enabled = true, "127.0.0.1", 0), "{}",
        PrometheusMeterRegistry(PrometheusConfig.DEFAULT), Future.successful(run)), 10.seconds)
      test(dashboard, run)
    }

  "POST /api/devices/restart-stopped" should {
    "restart the stopped devices for a script or the dashboard's own page: 202 and how many were Stopped" in withDashboard { (dashboard, run) =>
      val own = dashboard.url.stripSuffix("/") // http://127.0.0.1:PORT, the origin of the pages it serves
      for headers <- Seq(Nil, Seq("Origin" -> own, "Sec-Fetch-Site" -> "same-origin")) do
        val reply = call(dashboard.url, "POST", headers*)
        assert(reply.statusCode == 202, reply.body)
        assert(reply.body == """{"restarting":3}""")
        assert(reply.headers.firstValue("Content-Type").get.startsWith("application/json"))
      assert(run.restarts.get == 2)
    }

    "refuse a page of another site or origin with 403, restarting nothing" in withDashboard { (dashboard, run) =>
      for headers <- Seq(Seq("Sec-Fetch-Site" -> "cross-site"), Seq("Sec-Fetch-Site" -> "same-site"), Seq("Origin" -> "http://evil.example"),
          Seq("Origin" -> "null")) do
        val reply = call(dashboard.url, "POST", headers*)
        assert(reply.statusCode == 403, s"$headers: ${reply.body}")
        assert(reply.body.startsWith("""{"error":"the dashboard's restart takes no POST from a page of another"""), reply.body)
      assert(call(dashboard.url, "GET").statusCode == 404) // only a POST restarts
      assert(run.restarts.get == 0)
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

  "/api/devices/target" should {
    "say the run's planned and wanted sizes, and resize it on a POST: 202, or 400 with why" in withDashboard { (dashboard, run) =>
      val url = dashboard.url + "api/devices/target"
      assert(send(url, "GET", "").body == """{"planned":10,"target":10}""")
      val resized = send(url, "POST", """{"devices": 4}""")
      assert(resized.statusCode == 202 && resized.body == """{"planned":10,"target":4}""", resized.body)
      assert(run.target == 4 && run.left == fleetsim.control.Leave.Vanish)
      assert(send(url, "POST", """{"devices": 3, "leave": "cleanly"}""").statusCode == 202)
      assert(run.target == 3 && run.left == fleetsim.control.Leave.Cleanly)
      assert(send(url, "POST", """{"devices": 4}""").statusCode == 202)
      val shape = """the body must be {\"devices\": N}, {\"devices\": N, \"rate\": R} or {\"devices\": N, \"leave\": \"cleanly\"}"""
      for (body, error) <- Seq("""{"devices": 11}""" -> "at most 10", """{"size": 4}""" -> shape, "4" -> shape,
          """{"devices": 5, "rate": 0}""" -> "a rate is devices a second, above 0, not 0.0",
          """{"devices": 5, "leave": "now"}""" -> "leave is vanish or cleanly, not 'now'") do
        val refused = send(url, "POST", body)
        assert(refused.statusCode == 400 && refused.body == s"""{"error":"$error"}""", s"$body: ${refused.body}")
      assert(send(url, "POST", """{"devices": 2}""", "Sec-Fetch-Site" -> "cross-site").statusCode == 403)
      assert(run.target == 4)
    }

    "shrink a run's fleet, its devices from the new size up Off, and grow it back, those joining afresh" in
      withReportingRun("api/devices/target", atEnd = summary => assert(summary.devices.byState("Off") == 0)) { (run, url, joins) =>
        assert(send(url, "POST", """{"devices": 2}""").statusCode == 202)
        eventually(assert(run.metrics.devicesByState(Reporting) == 2 && run.metrics.devicesByState(Off) == 3))
        assert(send(url, "GET", "").body == """{"planned":5,"target":2}""")
        assert(send(url, "POST", """{"devices": 5}""").statusCode == 202)
        eventually(assert(run.metrics.devicesByState(Reporting) == 5 && run.metrics.devicesByState(Off) == 0))
        assert(run.controller.get.counts.received("join") == joins + 3) // powered on as after a reboot: they join again
      }
  }

  "/api/actions/power-cut" should {
    "cut the power of the devices asked for, which come back after the outage with fresh joins; 400 with why for a bad ask" in
      withReportingRun("api/actions/power-cut") { (run, url, joins) =>
        val cut = send(url, "POST", """{"devices": "1-3", "for": "2s", "seed": 9}""")
        assert(cut.statusCode == 202 && cut.body == """{"action":"power-cut","devices":3,"seed":9,"for":"2 seconds"}""", cut.body)
        eventually(assert(run.metrics.devicesByState(Off) == 3 && run.metrics.devicesByState(Reporting) == 2))
        eventually(assert(run.metrics.devicesByState(Reporting) == 5 && run.metrics.devicesByState(Off) == 0))
        assert(run.controller.get.counts.received("join") == joins + 3)
        for (body, error) <- Seq("""{"devices": "lots", "for": "2s"}""" -> "devices must be a share (30%), a range of device numbers (100-199) or all (got 'lots')",
            """{"devices": "30%", "for": "soon"}""" -> "for must be a duration, like 20s or 2m (got 'soon')") do
          val refused = send(url, "POST", body)
          assert(refused.statusCode == 400 && refused.body == s"""{"error":"$error"}""", refused.body)
      }
  }

  "A cut that outlasts the run" should {
    "be summed up as acting until the run ended, its devices not back by the end" in
      withReportingRun("api/actions/power-cut", atEnd = s => {
        val cut = s.actions.find(_.kind == "power-cut").get
        assert(cut.cut == 2 && cut.neverBack == 2 && cut.forS > 0 && cut.forS <= s.run.durationS - cut.atS, cut)
        assert(Summary.render(s).contains("0 of 2 cut back, 2 not back by the end"), Summary.render(s))
      }) { (run, url, _) =>
        val cut = send(url, "POST", """{"devices": "0-1", "for": "10m", "seed": 3}""")
        assert(cut.statusCode == 202, cut.body)
        eventually(assert(run.metrics.devicesByState(Off) == 2))
      }
  }

  "/api/actions/partition" should {
    "cut the devices asked for off on the fleet's side until it heals, and say in the summary they all came back" in
      withReportingRun("api/actions/partition", atEnd = s => {
        val partition = s.actions.find(_.kind == "partition").get
        assert(partition.devices == 2 && partition.cut == 2 && partition.recovered == 2 && partition.recoveryMs.p100.isDefined, partition)
      }) { (run, url, _) =>
        val cut = send(url, "POST", """{"devices": "0-1", "for": "2s", "seed": 5}""")
        assert(cut.statusCode == 202 && cut.body == """{"action":"partition","devices":2,"seed":5,"for":"2 seconds"}""", cut.body)
        // Heartbeats every 10 s may not fall in 2 s: the two are back as it heals, Reporting all along.
        eventually(timeout(Span(10, Seconds)))(assert(run.metrics.snapshot().actions.get(0).exists(_.recovery.count == 2)))
        assert(run.metrics.devicesByState(Reporting) == 5)
      }
  }

  "/api/actions/reboot-wave" should {
    "reboot a share of the devices spread over a while, each joining afresh; 400 with why for a bad ask" in
      withReportingRun("api/actions/reboot-wave") { (run, url, joins) =>
        val wave = send(url, "POST", """{"devices": "all", "over": "2s", "down": "1s", "seed": 4}""")
        assert(wave.statusCode == 202 && wave.body == """{"action":"reboot-wave","devices":5,"seed":4,"over":"2 seconds","down":"1 second"}""", wave.body)
        eventually(assert(run.controller.get.counts.received("join") == joins + 5 && run.metrics.devicesByState(Reporting) == 5))
        val refused = send(url, "POST", """{"devices": "1-3", "over": "2s"}""")
        assert(refused.statusCode == 400 && refused.body == """{"error":"devices must be a share (30%) or all (got '1-3')"}""", refused.body)
      }
  }

  "The run's controls, bound where other hosts reach them (--dashboard-host)" should {
    import org.apache.pekko.http.scaladsl.model.{AttributeKeys, HttpMethods, HttpRequest as Request, RemoteAddress}
    import org.apache.pekko.http.scaladsl.model.headers.RawHeader
    /** A POST as it arrives from `from`, judged without a socket (only loopback carries the tests' traffic). */
    def refusal(from: String, token: Option[String], headers: (String, String)*): Option[String] =
      val request = Request(HttpMethods.POST, "/api/devices/target", headers.map((n, v) => RawHeader(n, v)).toList)
        .addAttribute(AttributeKeys.remoteAddress, RemoteAddress(java.net.InetAddress.getByName(from)))
      Dashboard.controlRefusal(request, "the dashboard's resize", anyHost = true, token)

    "answer a caller on another host only with the run's token, and loopback without one" in {
      assert(refusal("10.1.2.3", None).contains("the dashboard's resize answers callers on other hosts only with a token: start the run with FLEETSIM_DASHBOARD_TOKEN set"))
      for auth <- Seq(Nil, Seq("Authorization" -> "Bearer wrong"), Seq("Authorization" -> "Basic s3cret")) do
        assert(refusal("10.1.2.3", Some("s3cret"), auth*).contains(
          "the dashboard's resize wants the run's token from callers on other hosts: Authorization: Bearer <token>"), auth)
      assert(refusal("10.1.2.3", Some("s3cret"), "Authorization" -> "Bearer s3cret").isEmpty)
      assert(refusal("10.1.2.3", Some("s3cret"), "Authorization" -> "Bearer s3cret", "Sec-Fetch-Site" -> "cross-site").nonEmpty) // a page of another site, token or not
      assert(refusal("127.0.0.1", Some("s3cret")).isEmpty)
      assert(refusal("127.0.0.1", None).isEmpty)
    }

    "never write the token to the run's results" in {
      val c = ConfigFactory.parseString("""fleetsim.dashboard.token = "s3cret-t0ken"""").withFallback(config).resolve()
      val settings = RunSettings(c)
      assert(settings.dashboard.token.contains("s3cret-t0ken"))
      assert(!settings.described.contains("s3cret-t0ken") && !settings.dashboard.toString.contains("s3cret-t0ken"))
    }
  }
