package fleetsim.web

import com.github.plokhotnyuk.jsoniter_scala.core.{JsonValueCodec, readFromArray, writeToString}
import com.github.plokhotnyuk.jsoniter_scala.macros.JsonCodecMaker
import com.typesafe.config.{Config, ConfigFactory, ConfigValueFactory}
import fleetsim.{CannotBind, Caller, HoconChecks}
import fleetsim.control.{Leave, Reach, RunAction, RunControl}
import fleetsim.metrics.Sample
import fleetsim.report.{Assets, Output}
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry
import org.apache.pekko.Done
import org.apache.pekko.actor.CoordinatedShutdown
import org.apache.pekko.actor.typed.ActorSystem
import org.apache.pekko.http.scaladsl.Http
import org.apache.pekko.http.scaladsl.model.*
import org.apache.pekko.http.scaladsl.model.sse.ServerSentEvent
import org.apache.pekko.http.scaladsl.marshalling.sse.EventStreamMarshalling.*
import org.apache.pekko.http.scaladsl.server.Directives.*
import org.apache.pekko.http.scaladsl.server.Route
import org.apache.pekko.stream.scaladsl.{BroadcastHub, Keep, Source}
import org.apache.pekko.stream.{BoundedSourceQueue, OverflowStrategy}

import java.net.{InetAddress, InetSocketAddress}
import java.nio.charset.StandardCharsets.UTF_8
import scala.collection.mutable
import scala.concurrent.duration.*
import scala.concurrent.{ExecutionContext, Future}
import scala.util.Try

/** Where the dashboard listens. Off (`enabled = false`) for runs that want no server at all.
  *
  * @param token what the run's controls ask of callers on other hosts; None: they answer loopback only
  */
final case class DashboardSettings(enabled: Boolean, host: String, port: Int, token: Option[String] = None):
  require(port >= 0 && port <= 65535, "fleetsim.dashboard.port must be between 0 and 65535")
  override def toString: String = s"DashboardSettings($enabled, $host, $port, ${token.map(_ => "<token>")})"

object DashboardSettings:
  def apply(config: Config): DashboardSettings =
    val c = config.getConfig("fleetsim.dashboard")
    DashboardSettings(c.getBoolean("enabled"), c.getString("host"), c.getInt("port"), Option(c.getString("token")).filter(_.nonEmpty))

/** The live dashboard: a page of charts fed one [[Sample]] a second over server-sent events,
  * `/metrics` for Prometheus, and the run's controls ([[RunControl]]): `POST /api/devices/target`
  * resizes the fleet, `POST /api/devices/restart-stopped` restarts the devices that stopped
  * themselves. Aggregates only, so it is as light at a million devices as at ten.
  */
final class Dashboard private (binding: Http.ServerBinding, samples: BoundedSourceQueue[Sample], history: Dashboard.History) extends Output:
  def address: InetSocketAddress = binding.localAddress
  def url: String = s"http://${address.getHostString}:${address.getPort}/"

  override def sample(sample: Sample): Unit =
    history.add(sample)
    samples.offer(sample) // a slow browser loses samples, never slows the run

  /** Ends the pages' event streams, so they see the run is over, and closes the port. */
  private def stop(): Future[Done] =
    samples.complete()
    binding.terminate(1.second).map(_ => Done)(using ExecutionContext.parasitic)

object Dashboard:
  /** A page opened mid-run starts with the last ten minutes. */
  private final class History(size: Int):
    private val samples = mutable.Queue.empty[Sample]
    def add(s: Sample): Unit = synchronized {
      samples.enqueue(s)
      if samples.size > size then samples.dequeue()
    }
    def all: List[Sample] = synchronized(samples.toList)

  /** @param control the run, once it has its devices */
  def start(settings: DashboardSettings, runJson: String, prometheus: PrometheusMeterRegistry, control: Future[RunControl])(using
      system: ActorSystem[?]): Future[Dashboard] =
    given ExecutionContext = system.executionContext
    val history = History(600)
    val (queue, live) = Source.queue[Sample](16).toMat(BroadcastHub.sink(bufferSize = 16))(Keep.both).run()
    live.runWith(org.apache.pekko.stream.scaladsl.Sink.ignore) // keeps the hub draining when no page is open
    val events = live
      .map(s => ServerSentEvent(writeToString(s)))
      .keepAlive(15.seconds, () => ServerSentEvent.heartbeat)
    // Bound by the user to an address other hosts reach (0.0.0.0, a LAN address): callers there are its users too.
    val anyHost = Try(InetAddress.getByName(settings.host)).toOption.exists(!_.isLoopbackAddress)
    val route = concat(routes(runJson, prometheus, history, events), controls(anyHost, settings.token, control))
    Http(system.classicSystem)
      .newServerAt(settings.host, settings.port)
      .bind(route)
      .map { binding =>
        val dashboard = Dashboard(binding, queue, history)
        // Stopped in the phase after the one where the CLI writes the summary: a page open at the
        // end gets the last sample, and /metrics answers with the final counts until then.
        CoordinatedShutdown(system).addTask(CoordinatedShutdown.PhaseServiceUnbind, "dashboard")(() => dashboard.stop())
        dashboard
      }
      .recoverWith(CannotBind.whenBinding(settings.host, settings.port, "dashboard"))

  private def routes(runJson: String, prometheus: PrometheusMeterRegistry, history: History, events: Source[ServerSentEvent, ?]): Route =
    def asset(path: String, contentType: ContentType.NonBinary) = complete(HttpEntity(contentType, Assets.text(path)))
    val js = MediaTypes.`application/javascript`.withCharset(HttpCharsets.`UTF-8`)
    get {
      concat(
        pathSingleSlash(asset("fleetsim/web/index.html", ContentTypes.`text/html(UTF-8)`)),
        path("assets" / "chart.umd.js")(asset(Assets.ChartJs, js)),
        path("assets" / "charts.js")(asset(Assets.Charts, js)),
        path("assets" / "style.css")(asset(Assets.Style, MediaTypes.`text/css`.withCharset(HttpCharsets.`UTF-8`))),
        path("api" / "run")(complete(HttpEntity(ContentTypes.`application/json`, runJson))),
        path("api" / "samples")(complete(HttpEntity(ContentTypes.`application/json`, history.all.map(writeToString[Sample](_)).mkString("[", ",", "]")))),
        path("events")(complete(events)),
        path("metrics") {
          complete(HttpEntity(ContentTypes.`text/plain(UTF-8)`, prometheus.scrape())) // Prometheus text format 0.0.4
        })
    }

  /** The run's controls. They change the run, so they are guarded as the controller's admin API is
    * ([[Caller.refusal]]): 403 `{"error": ...}`.
    *  - `GET /api/devices/target`: `{"planned": P, "target": T}`
    *  - `POST /api/devices/target` `{"devices": N}`: 202 `{"planned": P, "target": N}`, or 400
    *    `{"error": ...}` outside 0 to P
    *  - `POST /api/devices/restart-stopped`: 202 `{"restarting": N}`, N devices Stopped when the fleet was told
    *  - `POST /api/actions/power-cut` `{"devices": "30%" | "100-199" | "all", "for": "20s", "seed": S}`:
    *    202 `{"action": "power-cut", "devices": N, "seed": S, "for": "20s"}`, or 400 `{"error": ...}`
    *  - `POST /api/actions/partition`, the same: the devices cut off on the fleet's side of the network for a while
    *  - `POST /api/actions/reboot-wave` `{"devices": "30%" | "all", "over": "60s", "down": "5s", "seed": S}`:
    *    202 `{"action": "reboot-wave", "devices": N, "seed": S, "over": ..., "down": ...}`, or 400
    */
  private def controls(anyHost: Boolean, token: Option[String], control: Future[RunControl]): Route =
    given ExecutionContext = ExecutionContext.parasitic // only to shape an answer
    def guarded(what: String)(inner: RunControl => Route): Route =
      extractRequest { request =>
        controlRefusal(request, what, anyHost, token) match
          case Some(why) => complete(StatusCodes.Forbidden, json(Refused(why)))
          case None => onSuccess(control)(inner)
      }
    /** A control's POST: its body read as an `A`, then `act` on the run: 202 with what that answers,
      * or 400 `{"error": ...}` with why not (a body that is not `shape` says so).
      */
    def posted[A: JsonValueCodec](what: String, shape: String)(act: (RunControl, A) => Either[String, Future[HttpEntity.Strict]]): Route =
      post {
        guarded(what) { run =>
          entity(as[Array[Byte]]) { body =>
            Try(readFromArray[A](body)).toEither.left.map(_ => s"the body must be $shape").flatMap(act(run, _)) match
              case Right(answer) => onSuccess(answer)(complete(StatusCodes.Accepted, _))
              case Left(why) => complete(StatusCodes.BadRequest, json(Refused(why)))
          }
        }
      }
    concat(
      path("api" / "actions" / "power-cut") {
        posted[CutAsked]("the dashboard's power cut", """{"devices": "30%", "for": "20s"}""") { (run, asked) =>
          CutAsked.action(asked)(RunAction.PowerCut(_, _)).map((cut, seed) => run.act(cut).map(n => json(CutStarted(cut, n, seed))))
        }
      },
      path("api" / "actions" / "partition") {
        posted[CutAsked]("the dashboard's partition", """{"devices": "30%", "for": "20s"}""") { (run, asked) =>
          CutAsked.action(asked)(RunAction.Partition(_, _)).map((cut, seed) => run.act(cut).map(n => json(CutStarted(cut, n, seed))))
        }
      },
      path("api" / "actions" / "reboot-wave") {
        posted[RebootWaveAsked]("the dashboard's reboot wave", """{"devices": "30%", "over": "60s"}""") { (run, asked) =>
          RebootWaveAsked.action(asked).map(wave => run.act(wave).map(n =>
            json(RebootWaveStarted("reboot-wave", n, wave.seed, wave.over.toCoarsest.toString, wave.down.toCoarsest.toString))))
        }
      },
      path("api" / "devices" / "target") {
        concat(
          get(onSuccess(control)(run => complete(json(Target(run.planned, run.target))))),
          posted[Resize]("the dashboard's resize", """{"devices": N}, {"devices": N, "rate": R} or {"devices": N, "leave": "cleanly"}""") { (run, asked) =>
            if asked.rate.exists(r => !(r > 0) || r.isInfinite) then Left(s"a rate is devices a second, above 0, not ${asked.rate.get}")
            else
              for
                leave <- asked.leave.fold(Right(Leave.Vanish))(Leave.parse)
                n <- run.resize(asked.devices, asked.rate, leave)
              yield Future.successful(json(Target(run.planned, n)))
          })
      },
      path("api" / "devices" / "restart-stopped") {
        post {
          guarded("the dashboard's restart")(run => onSuccess(run.act(RunAction.RestartStopped))(n => complete(StatusCodes.Accepted, json(Restarting(n)))))
        }
      })

  /** Why a control refuses this call: as the controller's admin API would ([[Caller.refusal]]), and
    * a caller on another host (let in by `--dashboard-host`) without the run's token. Without a token
    * the controls answer loopback only, whatever the host; the page and /metrics answer every caller.
    */
  private[web] def controlRefusal(request: HttpRequest, what: String, anyHost: Boolean, token: Option[String]): Option[String] =
    val remote = Caller.address(request).forall(!_.isLoopbackAddress)
    def bearer = request.headers.collectFirst { case h if h.is("authorization") => h.value.trim }.filter(_.startsWith("Bearer ")).map(_.drop(7).trim)
    if anyHost && remote then
      token match
        case None => Some(s"$what answers callers on other hosts only with a token: start the run with FLEETSIM_DASHBOARD_TOKEN set")
        case Some(t) if !bearer.exists(b => java.security.MessageDigest.isEqual(b.getBytes(UTF_8), t.getBytes(UTF_8))) =>
          Some(s"$what wants the run's token from callers on other hosts: Authorization: Bearer <token>")
        case _ => Caller.refusal(request, what, anyHost, tunnelled = false)
    else Caller.refusal(request, what, anyHost, tunnelled = false)

  /** A power cut or a partition as asked: which devices (a share, a range of numbers or all), for how long, drawn with which seed. */
  private final case class CutAsked(devices: String, `for`: String, seed: Option[Long] = None)
  private object CutAsked:
    /** The action `make` makes of the devices reached and for how long, and the seed its share is drawn with; or why not. */
    def action(a: CutAsked)(make: (Reach, FiniteDuration) => RunAction): Either[String, (RunAction, Long)] =
      val seed = seedOf(a.seed)
      for lasting <- durationOf(a.`for`, "for"); reached <- Reach.parse(a.devices, seed) yield (make(reached, lasting), seed)
  private final case class CutStarted(action: String, devices: Long, seed: Long, `for`: String)
  private object CutStarted:
    def apply(cut: RunAction, devices: Long, seed: Long): CutStarted = CutStarted(cut.kind, devices, seed, cut.span.toCoarsest.toString)

  /** A reboot wave as asked: a share of the devices (or all), spread over how long, each down how long (5 s unless said). */
  private final case class RebootWaveAsked(devices: String, over: String, down: Option[String] = None, seed: Option[Long] = None)
  private object RebootWaveAsked:
    def action(a: RebootWaveAsked): Either[String, RunAction.RebootWave] =
      for s <- Reach.share(a.devices); over <- durationOf(a.over, "over"); down <- durationOf(a.down.getOrElse("5s"), "down")
      yield RunAction.RebootWave(s, seedOf(a.seed), over, down)
  private final case class RebootWaveStarted(action: String, devices: Long, seed: Long, over: String, down: String)

  /** The seed asked for, else one picked at random (and told back, to hit the same devices again). */
  private def seedOf(asked: Option[Long]): Long = asked.getOrElse(java.util.concurrent.ThreadLocalRandom.current().nextLong(1L << 48))
  /** A positive duration as HOCON writes one (20s, 2m), or why not. */
  private def durationOf(text: String, name: String): Either[String, FiniteDuration] =
    HoconChecks.positiveDuration(ConfigFactory.empty.withValue("d", ConfigValueFactory.fromAnyRef(text)), "d")
      .toRight(s"$name must be a duration, like 20s or 2m (got '$text')")

  private final case class Restarting(restarting: Long)
  private final case class Target(planned: Int, target: Int)
  private final case class Resize(devices: Int, rate: Option[Double] = None, leave: Option[String] = None)
  private final case class Refused(error: String)
  private given JsonValueCodec[Restarting] = JsonCodecMaker.make
  private given JsonValueCodec[Target] = JsonCodecMaker.make
  private given JsonValueCodec[Resize] = JsonCodecMaker.make
  private given JsonValueCodec[Refused] = JsonCodecMaker.make
  private given JsonValueCodec[CutAsked] = JsonCodecMaker.make
  private given JsonValueCodec[CutStarted] = JsonCodecMaker.make
  private given JsonValueCodec[RebootWaveAsked] = JsonCodecMaker.make
  private given JsonValueCodec[RebootWaveStarted] = JsonCodecMaker.make
  private def json[A: JsonValueCodec](a: A) = HttpEntity(ContentTypes.`application/json`, writeToString(a))
