package fleetsim.controller

import com.github.plokhotnyuk.jsoniter_scala.core.*
import com.github.plokhotnyuk.jsoniter_scala.macros.*
import fleetsim.Caller
import fleetsim.metrics.ControllerCounts
import org.apache.pekko.http.scaladsl.model.*
import org.apache.pekko.http.scaladsl.server.Directives.*
import org.apache.pekko.http.scaladsl.server.Route

import scala.util.Try

/** The reference controller's HTTP surface, composed of its route sets: protocol v1 under `/api/v1`
  * ([[ProtocolV1Routes]]), the other dialects ([[Dialects]]), and under `/admin` the admin API
  * ([[AdminRoutes]]) and the fault switches ([[FaultRoutes]]). Admin calls are answered only to
  * callers whose socket is on loopback, and change nothing for a browser page of another origin
  * ([[Caller.refusal]]).
  */
final class ControllerRoutes(registry: Registry, settings: ControllerSettings):
  /** Set once the SSH server is up (it needs these routes first). */
  @volatile private[controller] var gateway: Option[SshGateway] = None
  @volatile private[controller] var broker: Option[MqttBroker] = None

  /** The registry's tallies plus the SSH server's open sessions. */
  def counts: ControllerCounts = registry.counts.copy(sshSessions = gateway.fold(0)(_.sessions))

  private val faults = FaultRoutes(registry, () => gateway, () => broker)
  private val dialects = Dialects(registry, settings, faults.faulty)
  private val v1 = ProtocolV1Routes(registry, settings, faults.faulty, () => gateway)
  private val admin = AdminRoutes(registry, () => counts, dialects.deleteAgent, () => broker)

  /** Devices of the other dialects (ap-agent and ap-shell, iot-telemetry) that applied the current config. */
  def dialectsUpToDate: Int = dialects.upToDate
  /** Sets the fault switches, as `PUT /admin/faults` does. */
  def inject(f: Faults): Unit = faults.set(f)

  val route: Route =
    val all = concat(
      pathPrefix("api" / "v1")(v1.route),
      dialects.route,
      pathPrefix("admin")(adminsOnly(concat(admin.route, faults.route))))
    if settings.clientCertsRequired then clientSubject(all) else all // the plain path as it was

  /** Notes the subject of the client's certificate (present with --client-certs-required). */
  private def clientSubject(inner: Route): Route =
    optionalAttribute(AttributeKeys.sslSession) {
      case Some(info) =>
        Try(info.session.getPeerCertificates.headOption).toOption.flatten.foreach {
          case cert: java.security.cert.X509Certificate => registry.sawClient(cert.getSubjectX500Principal.getName)
          case _ => () // not X.509: nothing to count
        }
        inner
      case None => inner
    }

  /** Loopback callers by their socket, not through a tunnel, and no writes from a browser page of another origin. */
  private def adminsOnly(inner: Route): Route =
    extractRequest { request =>
      Caller.refusal(request, "the admin API", anyHost = false, tunnelled = SshGateway.tunnelled(request)) match
        case Some(why) => complete(StatusCodes.Forbidden, why)
        case None => inner
    }

/** The admin API's replies, as its callers read them. */
object ControllerRoutes:
  /** A row of `GET /admin/devices`; `lastSeen` is the last join or heartbeat, ISO-8601 in UTC;
    * `address` where that call came from.
    */
  final case class DeviceView(mac: String, serial: String, model: String, firmware: String, state: String, configSeq: Long,
      joins: Long, lastSeen: String, address: String)
  final case class Dropped(sessions: Int)
  /** A config push: the new configSeq, and the messages published for it. */
  final case class Pushed(configSeq: Long, messages: Int)

  given JsonValueCodec[ControllerCounts] = JsonCodecMaker.make
  given JsonValueCodec[Faults] = JsonCodecMaker.make
  given JsonValueCodec[List[DeviceView]] = JsonCodecMaker.make
  given JsonValueCodec[Dropped] = JsonCodecMaker.make
  given JsonValueCodec[Pushed] = JsonCodecMaker.make

  private[controller] def json[A: JsonValueCodec](a: A): HttpEntity.Strict =
    HttpEntity(ContentTypes.`application/json`, writeToArray(a))
