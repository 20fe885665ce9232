package fleetsim.controller

import com.github.plokhotnyuk.jsoniter_scala.core.readFromArray
import fleetsim.controller.ControllerRoutes.{DeviceView, Pushed, json, given}
import fleetsim.metrics.ControllerCounts
import fleetsim.protocol.HeartbeatReply
import org.apache.pekko.http.scaladsl.model.*
import org.apache.pekko.http.scaladsl.server.Directives.*
import org.apache.pekko.http.scaladsl.server.Route

import java.time.Instant
import scala.util.Try

/** The admin API, mounted under `/admin` by [[ControllerRoutes]], which answers it only to callers
  * on loopback: the counts and devices, config versions and pushes, forbidding and allowing devices,
  * deleting agents, and the SSH gateways' key checks. The fault switches are [[FaultRoutes]]'.
  *
  * @param counts the controller's tallies, its SSH server's sessions included
  * @param deleteAgent deletes an ap-agent device by id: false when none has it
  * @param broker the MQTT broker, once it is up
  */
private final class AdminRoutes(registry: Registry, counts: () => ControllerCounts, deleteAgent: String => Boolean,
    broker: () => Option[MqttBroker]):
  val route: Route = concat(
    (path("counts") & get) {
      complete(json(counts()))
    },
    // A gateway's question: is this the key the device joined with?
    (path("ssh" / "admits") & post & entity(as[Array[Byte]])) { body =>
      val check = Try(readFromArray[SshGateway.KeyCheck](body)).toOption
      val key = check.flatMap(c => SshGateway.publicKey(c.key).toOption)
      (check, key) match
        case (Some(c), Some(k)) if registry.admits(c.user, k) => complete(StatusCodes.NoContent)
        case (Some(_), Some(_)) => complete(StatusCodes.Forbidden)
        case _ => complete(StatusCodes.BadRequest, "expected {user, key} with an OpenSSH public key")
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
      broker() match
        case None => complete(StatusCodes.NotFound, "this controller runs no MQTT broker (run --transport mqtt)")
        case Some(b) if to == "fleet" || to == "each" =>
          val seq = registry.bumpConfig()
          val payload = MqttBroker.configPush(seq, s"${uri.scheme}://${uri.authority}")
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
      complete(if deleteAgent(id) then StatusCodes.NoContent else StatusCodes.NotFound)
    })
