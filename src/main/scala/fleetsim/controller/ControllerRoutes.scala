package fleetsim.controller

import com.github.plokhotnyuk.jsoniter_scala.core.*
import com.github.plokhotnyuk.jsoniter_scala.macros.*
import fleetsim.Caller
import fleetsim.protocol.*
import fleetsim.transport.SshEndpoint
import fleetsim.metrics.ControllerCounts
import org.apache.pekko.actor.typed.ActorSystem
import org.apache.pekko.http.scaladsl.model.*
import org.apache.pekko.http.scaladsl.server.Directives.*
import org.apache.pekko.http.scaladsl.server.{Directive0, Directive1, Route, StandardRoute}

import org.apache.sshd.common.config.keys.{PublicKeyEntry, PublicKeyEntryResolver}

import java.nio.charset.StandardCharsets.UTF_8
import java.time.Instant

import java.util.concurrent.{CompletableFuture, ThreadLocalRandom, TimeUnit}
import java.util.concurrent.atomic.AtomicReference
import scala.concurrent.{Future, Promise}
import scala.concurrent.duration.*
import scala.util.{Failure, Try}

/** Protocol v1 and the admin API over HTTP. Admin calls are answered only to callers whose socket is on
  * loopback, and change nothing for a browser page of another origin ([[Caller.refusal]]).
  */
final class ControllerRoutes(registry: Registry, settings: ControllerSettings)(using system: ActorSystem[?]):
  import ControllerRoutes.{*, given}

  @volatile private var faults = Faults()
  /** Set once the SSH server is up (it needs these routes first). */
  @volatile private[controller] var gateway: Option[SshGateway] = None
  @volatile private[controller] var broker: Option[MqttBroker] = None
  private val configDocument = AtomicReference[(Long, Array[Byte])]((0L, Array.emptyByteArray))

  /** The registry's tallies plus the SSH server's open sessions. */
  def counts: ControllerCounts = registry.counts.copy(sshSessions = gateway.fold(0)(_.sessions))

  private val dialects = Dialects(registry, settings, (kind: String) => faulty(kind))

  /** Devices of the other dialects (ap-agent and ap-shell, iot-telemetry) that applied the current config. */
  def dialectsUpToDate: Int = dialects.upToDate

  val route: Route =
    val all = concat(
      pathPrefix("api" / "v1")(extractRequest(r => api(tunnelled(r), Caller.address(r).fold("")(_.getHostAddress)))),
      dialects.route,
      pathPrefix("admin")(adminsOnly(admin)))
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

  private val tunnelledHeader = SshGateway.TunnelledHeader.toLowerCase

  /** Through a tunnel: of this controller's SSH server, or of a gateway in a process of its own. */
  private def tunnelled(request: HttpRequest): Boolean =
    request.attribute(SshGateway.Tunnelled).isDefined || request.headers.exists(_.is(tunnelledHeader))

  // ---- protocol v1 ----

  /** @param tunnelled the call came through an SSH tunnel
    * @param address where the call came from ("" through a tunnel)
    */
  private def api(tunnelled: Boolean, address: String): Route = concat(
    // The document a config push names (MQTT devices have no session here, so no join is asked for).
    (path("config" / LongNumber) & get & faulty(ApiCall.Config)) { seq =>
      if seq != registry.configSeq then complete(StatusCodes.NotFound, s"no config $seq: the current one is ${registry.configSeq}")
      else
        registry.countReceived(ApiCall.Config.key, tunnelled)
        complete(HttpEntity(ContentTypes.`application/json`, currentConfig()))
    },
    path("join") {
      (post & faulty(ApiCall.Join) & entity(as[Array[Byte]])) { body =>
        Protocol.parse[JoinRequest](body) match
          case None => complete(StatusCodes.BadRequest, "expected {mac, serial, model, firmware, sshKey?}")
          case Some(join) if registry.isForbidden(join.mac) => refuse(ApiCall.Join)
          case Some(join) =>
            val key = join.sshKey.filter(_.nonEmpty).map(publicKey)
            key match
              case Some(Failure(_)) => complete(StatusCodes.BadRequest, "sshKey is not an OpenSSH public key")
              case _ =>
                registry.join(join.mac, join.serial, join.model, join.firmware, key.map(_.get), address)
                val ssh = sshEndpointFor(join.mac)
                accept(ApiCall.Join, tunnelled, JoinReply(settings.heartbeatInterval.toSeconds.toInt, settings.statsInterval.toSeconds.toInt, registry.configSeq, ssh))
      }
    },
    pathPrefix("devices" / Segment) { mac =>
      concat(
        path("heartbeat") {
          (post & faulty(ApiCall.Heartbeat) & joined(ApiCall.Heartbeat, mac) & entity(as[Array[Byte]])) { (device, body) =>
            Protocol.parse[Heartbeat](body).foreach { beat =>
              device.configSeq = beat.configSeq
              device.state = beat.state
              registry.sawUptime(device, beat.uptimeS)
            }
            device.lastSeenMillis = System.currentTimeMillis()
            registry.seenFrom(device, address)
            accept(ApiCall.Heartbeat, tunnelled, HeartbeatReply(registry.configSeq))
          }
        },
        path("stats" / Segment) { kind =>
          if StatsKind.fromKey(kind).isEmpty then complete(StatusCodes.NotFound, s"no stats kind '$kind'")
          else
            (post & faulty(ApiCall.Stats) & joined(ApiCall.Stats, mac) & entity(as[Array[Byte]])) { (_, _) =>
              registry.countReceived(ApiCall.Stats.key, tunnelled)
              complete(StatusCodes.OK)
            }
        },
        path("config") {
          (get & faulty(ApiCall.Config) & joined(ApiCall.Config, mac)) { _ =>
            registry.countReceived(ApiCall.Config.key, tunnelled)
            complete(HttpEntity(ContentTypes.`application/json`, currentConfig()))
          }
        })
    })

  /** Where a device opens its tunnel: one of the gateways, spread by MAC, or this controller's SSH server. */
  private def sshEndpointFor(mac: String): Option[SshEndpoint] =
    val gateways = settings.sshGateways
    if gateways.nonEmpty then Some(gateways(Math.floorMod(mac.hashCode, gateways.size)))
    else gateway.map(g => SshEndpoint(g.address.getHostString, g.address.getPort))

  /** An OpenSSH public key line (`ssh-ed25519 AAAA...`), as a device presents it. */
  private def publicKey(text: String): Try[java.security.PublicKey] =
    Try(PublicKeyEntry.parsePublicKeyEntry(text).resolvePublicKey(null, null, PublicKeyEntryResolver.FAILING))

  private def accept[A: JsonValueCodec](kind: ApiCall, tunnelled: Boolean, reply: A): Route =
    registry.countReceived(kind.key, tunnelled)
    complete(HttpEntity(ContentTypes.`application/json`, writeToArray(reply)))

  private def refuse(kind: ApiCall): StandardRoute =
    registry.countRefused(kind.key)
    complete(StatusCodes.Forbidden)

  /** The device's record, or 403 when it has not joined or is forbidden: it must join (again). */
  private def joined(kind: ApiCall, mac: String): Directive1[DeviceRecord] =
    registry.find(mac).filter(_ => !registry.isForbidden(mac)) match
      case Some(device) => provide(device)
      case None => StandardRoute.toDirective(refuse(kind))

  /** Applies the fault switches: added latency first, then an injected 500 at the error rate, then
    * a 429 with Retry-After at the throttle rate.
    */
  private def faulty(kind: ApiCall): Directive0 = faulty(kind.key)

  /** Done `ms` from now, to the millisecond: on the JDK's delay thread, which sleeps while no reply
    * is held back, not on Pekko's scheduler, which ticks every 20 ms (reference.conf).
    */
  private def later(ms: Long): Future[Unit] =
    val done = Promise[Unit]()
    CompletableFuture.delayedExecutor(ms, TimeUnit.MILLISECONDS, (task: Runnable) => task.run()).execute(() => done.success(()))
    done.future

  private def faulty(kind: String): Directive0 =
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

  /** The config document for the current seq, padded to the configured size; rendered once per seq. */
  private def currentConfig(): Array[Byte] =
    val seq = registry.configSeq
    val cached = configDocument.get
    if cached._1 == seq then cached._2
    else
      val head = s"""{"configSeq":$seq,"wlans":[{"ssid":"fleetsim","vlan":1}],"padding":""""
      val padding = "x".repeat((settings.configBytes - head.length - 2).max(0))
      val rendered = (head + padding + "\"}").getBytes(UTF_8)
      configDocument.set(seq -> rendered)
      rendered

  // ---- admin ----

  private def admin: Route = concat(
    (path("counts") & get) {
      complete(json(counts))
    },
    // A gateway's question: is this the key the device joined with?
    (path("ssh" / "admits") & post & entity(as[Array[Byte]])) { body =>
      val check = Try(readFromArray[SshGateway.KeyCheck](body)).toOption
      val key = check.flatMap(c => publicKey(c.key).toOption)
      (check, key) match
        case (Some(c), Some(k)) if registry.admits(c.user, k) => complete(StatusCodes.NoContent)
        case (Some(_), Some(_)) => complete(StatusCodes.Forbidden)
        case _ => complete(StatusCodes.BadRequest, "expected {user, key} with an OpenSSH public key")
    },
    (path("ssh" / "drop") & post & parameter("fraction".as[Double].withDefault(1.0))) { fraction =>
      gateway match
        case Some(g) => complete(json(Dropped(g.drop(fraction.max(0).min(1)))))
        case None => complete(StatusCodes.NotFound, "this controller runs no SSH server")
    },
    (path("mqtt" / "drop") & post) {
      broker match
        case Some(b) => complete(json(Dropped(b.dropAll())))
        case None => complete(StatusCodes.NotFound, "this controller runs no MQTT broker (run --transport mqtt)")
    },
    (path("devices") & get & parameter("limit".as[Int].withDefault(100))) { limit =>
      val rows = registry.devicesView.take(limit).map { (mac, d) =>
        DeviceView(mac, d.serial, d.model, d.firmware, d.state, d.configSeq, d.joins, Instant.ofEpochMilli(d.lastSeenMillis).toString, d.address)
      }
      complete(json(rows.toList))
    },
    (path("config" / "bump") & post) {
      complete(json(HeartbeatReply(registry.bumpConfig())))
    },
    // MQTT devices hear of new configuration when it is pushed: to the fleet's topic, or to each device's own.
    // The push names where the document is, at the address the admin call reached this controller by.
    (path("config" / "push") & post & parameter("to".withDefault("fleet")) & extractUri) { (to, uri) =>
      broker match
        case None => complete(StatusCodes.NotFound, "this controller runs no MQTT broker (run --transport mqtt)")
        case Some(b) if to == "fleet" || to == "each" =>
          val seq = registry.bumpConfig()
          val payload = s"""{"configSeq":$seq,"url":"${uri.scheme}://${uri.authority}/api/v1/config/$seq"}"""
          val pushed = if to == "fleet" then { b.publish(MqttBroker.FleetTopic, payload); 1 } else b.pushEach(payload)
          complete(json(Pushed(seq, pushed)))
        case Some(_) => complete(StatusCodes.BadRequest, "to must be fleet (one message on fleet/config) or each (one on each devices/ID/config)")
    },
    (path("devices" / Segment / "forbid") & post) { mac =>
      registry.forbid(mac)
      complete(StatusCodes.NoContent)
    },
    (path("devices" / Segment / "allow") & post) { mac =>
      registry.allow(mac)
      complete(StatusCodes.NoContent)
    },
    // An ap-agent device deleted, as an operator removes one: its calls get 404 until it registers again.
    (path("agent" / "devices" / Segment / "delete") & post) { id =>
      complete(if dialects.deleteAgent(id) then StatusCodes.NoContent else StatusCodes.NotFound)
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
            case e: IllegalArgumentException => complete(StatusCodes.BadRequest, e.getMessage)
        })
    })

  /** Loopback callers by their socket, not through a tunnel, and no writes from a browser page of another origin. */
  private def adminsOnly(inner: Route): Route =
    extractRequest { request =>
      Caller.refusal(request, "the admin API", anyHost = false, tunnelled = tunnelled(request)) match
        case Some(why) => complete(StatusCodes.Forbidden, why)
        case None => inner
    }

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

  private def json[A: JsonValueCodec](a: A): HttpEntity.Strict =
    HttpEntity(ContentTypes.`application/json`, writeToArray(a))
