package fleetsim.controller

import com.github.plokhotnyuk.jsoniter_scala.core.{JsonReaderException, readFromArray}
import fleetsim.controller.ControllerRoutes.{Dropped, json, given}
import org.apache.pekko.http.scaladsl.model.*
import org.apache.pekko.http.scaladsl.server.Directives.*
import org.apache.pekko.http.scaladsl.server.{Directive0, Route, StandardRoute}

import java.util.concurrent.{CompletableFuture, ThreadLocalRandom, TimeUnit}
import scala.concurrent.{Future, Promise}

/** The controller misbehaving on purpose (docs/faults.md): the fault switches every dialect's calls
  * pass through ([[faulty]]), and the admin calls that flip them or drop the devices' sessions,
  * mounted under `/admin` by [[ControllerRoutes]].
  *
  * @param gateway this controller's SSH server, once it is up
  * @param broker its MQTT broker, once it is up
  */
private final class FaultRoutes(registry: Registry, gateway: () => Option[SshGateway], broker: () => Option[MqttBroker]):
  @volatile private var faults = Faults()

  /** Sets the fault switches, as `PUT /admin/faults` does. */
  def set(f: Faults): Unit = faults = f

  /** Applies the fault switches: added latency first, then an injected 500 at the error rate, then
    * a 429 with Retry-After at the throttle rate; each injected error counted under `kind`.
    */
  def faulty(kind: String): Directive0 =
    val f = faults
    val delayed: Directive0 =
      if f.latencyMs == 0 then pass
      else onSuccess(later(f.latencyMs))
    delayed.tflatMap { _ =>
      val dice = ThreadLocalRandom.current().nextDouble()
      if f.errorRate > 0 && dice < f.errorRate then
        registry.countInjectedError(kind)
        StandardRoute.toDirective(complete(StatusCodes.InternalServerError, "injected fault"))
      else if f.throttleRate > 0 && dice < f.errorRate + f.throttleRate then
        registry.countInjectedError(kind)
        StandardRoute.toDirective(complete(HttpResponse(StatusCodes.TooManyRequests, Seq(headers.RawHeader("Retry-After", f.retryAfterS.toString)))))
      else pass
    }

  /** Done `ms` from now, to the millisecond: on the JDK's delay thread, which sleeps while no reply
    * is held back.
    */
  private def later(ms: Long): Future[Unit] =
    val done = Promise[Unit]()
    CompletableFuture.delayedExecutor(ms, TimeUnit.MILLISECONDS, (task: Runnable) => task.run()).execute(() => done.success(()))
    done.future

  /** The admin calls, below `/admin`. */
  val route: Route = concat(
    (path("ssh" / "drop") & post & parameter("fraction".as[Double].withDefault(1.0))) { fraction =>
      gateway() match
        case Some(g) => complete(json(Dropped(g.drop(fraction.max(0).min(1)))))
        case None => complete(StatusCodes.NotFound, "this controller runs no SSH server")
    },
    (path("mqtt" / "drop") & post) {
      broker() match
        case Some(b) => complete(json(Dropped(b.dropAll())))
        case None => complete(StatusCodes.NotFound, "this controller runs no MQTT broker (run --transport mqtt)")
    },
    path("faults") {
      concat(
        get(complete(json(faults))),
        (put & entity(as[Array[Byte]])) { body =>
          try
            faults = readFromArray[Faults](body)
            complete(json(faults))
          catch
            case e: JsonReaderException => complete(StatusCodes.BadRequest, s"expected {errorRate, latencyMs, throttleRate, retryAfterS}: ${e.getMessage}")
            case e: IllegalArgumentException => complete(StatusCodes.BadRequest, e.getMessage.stripPrefix("requirement failed: "))
        })
    })
