package fleetsim.controller

import com.github.plokhotnyuk.jsoniter_scala.core.JsonValueCodec
import fleetsim.Caller
import fleetsim.controller.ControllerRoutes.json
import fleetsim.protocol.*
import fleetsim.transport.ssh.SshEndpoint
import org.apache.pekko.http.scaladsl.model.*
import org.apache.pekko.http.scaladsl.server.Directives.*
import org.apache.pekko.http.scaladsl.server.{Directive0, Directive1, Route, StandardRoute}

import java.nio.charset.StandardCharsets.UTF_8
import java.util.concurrent.atomic.AtomicReference
import scala.util.Failure

/** Protocol v1 (the ap-v1 profile), mounted under `/api/v1` by [[ControllerRoutes]]: joins,
  * heartbeats, stats and the config document, each counted in the registry by its [[ApiCall]].
  *
  * @param faulty the fault switches, applied per call kind
  * @param gateway this controller's SSH server, once it is up: where joins send devices when no gateways are named
  */
private final class ProtocolV1Routes(registry: Registry, settings: ControllerSettings, faulty: String => Directive0,
    gateway: () => Option[SshGateway]):
  private val configDocument = AtomicReference[(Long, Array[Byte])]((0L, Array.emptyByteArray))

  val route: Route = extractRequest(r => calls(SshGateway.tunnelled(r), Caller.address(r).fold("")(_.getHostAddress)))

  /** @param tunnelled the call came through an SSH tunnel
    * @param address where the call came from ("" through a tunnel)
    */
  private def calls(tunnelled: Boolean, address: String): Route = concat(
    // The document a config push names (MQTT devices have no session here, so no join is asked for).
    (path("config" / LongNumber) & get & faulty(ApiCall.Config.key)) { seq =>
      if seq != registry.configSeq then complete(StatusCodes.NotFound, s"no config $seq: the current one is ${registry.configSeq}")
      else
        registry.countReceived(ApiCall.Config.key, tunnelled)
        complete(HttpEntity(ContentTypes.`application/json`, currentConfig()))
    },
    path("join") {
      (post & faulty(ApiCall.Join.key) & entity(as[Array[Byte]])) { body =>
        Protocol.parse[JoinRequest](body) match
          case None => complete(StatusCodes.BadRequest, "expected {mac, serial, model, firmware, sshKey?}")
          case Some(join) if registry.isForbidden(join.mac) => refuse(ApiCall.Join)
          case Some(join) =>
            val key = join.sshKey.filter(_.nonEmpty).map(SshGateway.publicKey)
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
          (post & faulty(ApiCall.Heartbeat.key) & joined(ApiCall.Heartbeat, mac) & entity(as[Array[Byte]])) { (device, body) =>
            Protocol.parse[Heartbeat](body).foreach { beat =>
              device.configSeq = beat.configSeq
              device.state = beat.state
              registry.sawUptime(mac, device, beat.uptimeS)
            }
            device.lastSeenMillis = System.currentTimeMillis()
            registry.seenFrom(device, address)
            accept(ApiCall.Heartbeat, tunnelled, HeartbeatReply(registry.configSeq))
          }
        },
        path("stats" / Segment) { kind =>
          if StatsKind.fromKey(kind).isEmpty then complete(StatusCodes.NotFound, s"no stats kind '$kind'")
          else
            (post & faulty(ApiCall.Stats.key) & joined(ApiCall.Stats, mac) & entity(as[Array[Byte]])) { (_, _) =>
              registry.countReceived(ApiCall.Stats.key, tunnelled)
              complete(StatusCodes.OK)
            }
        },
        path("config") {
          (get & faulty(ApiCall.Config.key) & joined(ApiCall.Config, mac)) { _ =>
            registry.countReceived(ApiCall.Config.key, tunnelled)
            complete(HttpEntity(ContentTypes.`application/json`, currentConfig()))
          }
        })
    })

  /** Where a device opens its tunnel: one of the gateways, spread by MAC, or this controller's SSH server. */
  private def sshEndpointFor(mac: String): Option[SshEndpoint] =
    val gateways = settings.sshGateways
    if gateways.nonEmpty then Some(gateways(Math.floorMod(mac.hashCode, gateways.size)))
    else gateway().map(g => SshEndpoint(g.address.getHostString, g.address.getPort))

  private def accept[A: JsonValueCodec](kind: ApiCall, tunnelled: Boolean, reply: A): Route =
    registry.countReceived(kind.key, tunnelled)
    complete(json(reply))

  private def refuse(kind: ApiCall): StandardRoute =
    registry.countRefused(kind.key)
    complete(StatusCodes.Forbidden)

  /** The device's record, or 403 when it has not joined or is forbidden: it must join (again). */
  private def joined(kind: ApiCall, mac: String): Directive1[DeviceRecord] =
    registry.find(mac).filter(_ => !registry.isForbidden(mac)) match
      case Some(device) => provide(device)
      case None => StandardRoute.toDirective(refuse(kind))

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
