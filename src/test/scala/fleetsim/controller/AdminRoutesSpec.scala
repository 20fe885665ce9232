package fleetsim.controller

import com.github.plokhotnyuk.jsoniter_scala.core.readFromString
import com.hivemq.client.mqtt.{MqttClient, MqttGlobalPublishFilter}
import fleetsim.controller.ControllerRoutes.{DeviceView, Pushed, given}
import fleetsim.metrics.ControllerCounts
import fleetsim.protocol.{HeartbeatReply, JoinReply}
import org.apache.pekko.http.scaladsl.model.StatusCodes.*
import org.apache.pekko.http.scaladsl.model.headers.RawHeader
import org.apache.pekko.http.scaladsl.model.{ContentTypes, HttpEntity}
import org.scalatest.wordspec.AnyWordSpec

import java.nio.charset.StandardCharsets.UTF_8
import java.time.Instant
import java.util.concurrent.TimeUnit

/** The admin API under /admin, call by call, as an operator's script calls it: what each answers
  * and changes, and its replies to calls it cannot take. (Who it answers: CallerSpec and ControllerSpec.)
  */
class AdminRoutesSpec extends AnyWordSpec with RoutesFixture:
  private val mac = "02:00:00:00:00:01"
  private val other = "02:00:00:00:00:02"

  private def join(r: Routes, m: String, sshKey: String = ""): Int =
    Post("/api/v1/join", joinBody(m, sshKey)) ~!> r.route ~> check(status.intValue)

  private def counts(r: Routes): ControllerCounts =
    Get("/admin/counts") ~!> r.route ~> check {
      assert(status == OK && contentType == ContentTypes.`application/json`)
      readFromString[ControllerCounts](responseAs[String])
    }

  "GET /admin/counts" should {
    "tally the devices registered and forbidden, the config version, and the calls received and refused by kind; 405 for a POST" in {
      val r = Routes()
      assert(join(r, mac) == 200 && join(r, other) == 200)
      Post(s"/admin/devices/$other/forbid") ~!> r.route ~> check(assert(status == NoContent))
      assert(join(r, other) == 403)
      val c = counts(r)
      assert((c.registered, c.forbidden, c.configSeq, c.sshSessions) == (1, 1, 1, 0))
      assert(c.received == Map("join" -> 2, "heartbeat" -> 0, "stats" -> 0, "config" -> 0))
      assert(c.refused("join") == 1 && c.injectedErrors.values.sum == 0)
      Post("/admin/counts") ~!> r.route ~> check(assert(status == MethodNotAllowed))
    }
  }

  "GET /admin/devices" should {
    "list each device as it joined and last reported, from where, at most `limit` of them; 400 for a limit that is no number" in {
      val r = Routes()
      val before = Instant.now()
      assert(join(r, mac) == 200 && join(r, mac) == 200 && join(r, other) == 200)
      Post(s"/api/v1/devices/$mac/heartbeat", json("""{"seq":1,"uptimeS":5,"state":"Reporting","configSeq":1}""")) ~!> r.route ~> check(
        assert(status == OK))
      val rows = Get("/admin/devices") ~!> r.route ~> check(readFromString[List[DeviceView]](responseAs[String]))
      assert(rows.map(_.mac).toSet == Set(mac, other))
      val row = rows.find(_.mac == mac).get
      assert(row.copy(lastSeen = "") == DeviceView(mac, s"FS-$mac", "FS-AP-100", "1.0.0", "Reporting", 1, 2, "", "127.0.0.1"))
      assert(!Instant.parse(row.lastSeen).isBefore(before.minusSeconds(1)) && row.lastSeen.endsWith("Z"))
      assert(rows.find(_.mac == other).get.state == "") // joined, no heartbeat yet
      Get("/admin/devices?limit=1") ~!> r.route ~> check(assert(readFromString[List[DeviceView]](responseAs[String]).size == 1))
      Get("/admin/devices?limit=many") ~!> r.route ~> check(assert(status == BadRequest))
    }
  }

  "POST /admin/config/bump" should {
    "answer the new config version, the one joins and heartbeats then hand out; 405 for a GET" in {
      val r = Routes()
      Post("/admin/config/bump") ~!> r.route ~> check(assert(readFromString[HeartbeatReply](responseAs[String]) == HeartbeatReply(2)))
      Post("/api/v1/join", joinBody(mac)) ~!> r.route ~> check(assert(readFromString[JoinReply](responseAs[String]).configSeq == 2))
      Get("/admin/config/bump") ~!> r.route ~> check(assert(status == MethodNotAllowed))
      assert(r.registry.configSeq == 2)
    }
  }

  "POST /admin/devices/{mac}/forbid and .../allow" should {
    "forget a forbidden device and refuse its joins until it is allowed again; 405 for a GET" in {
      val r = Routes()
      assert(join(r, mac) == 200)
      Post(s"/admin/devices/$mac/forbid") ~!> r.route ~> check(assert(status == NoContent))
      assert(r.registry.find(mac).isEmpty && join(r, mac) == 403)
      Get(s"/admin/devices/$mac/allow") ~!> r.route ~> check(assert(status == MethodNotAllowed))
      assert(join(r, mac) == 403)
      Post(s"/admin/devices/$mac/allow") ~!> r.route ~> check(assert(status == NoContent))
      assert(join(r, mac) == 200)
      val c = counts(r)
      assert((c.registered, c.forbidden, c.refused("join")) == (1, 0, 2))
    }
  }

  "POST /admin/agent/devices/{id}/delete" should {
    "delete a registered agent, whose calls then get 404 until it registers again; 404 for an id no agent has" in {
      val r = Routes()
      def register(): String =
        Post("/agent/register", agentRegistration(mac)) ~!> r.route ~> check {
          assert(status == OK, responseAs[String])
          responseAs[String].linesIterator.collectFirst { case s"key: $key" => key }.get
        }
      def checksum(key: String): Int =
        Get("/agent/devices/020000000001/checksum").addHeader(RawHeader("X-Agent-Key", key)) ~!> r.route ~> check(status.intValue)
      val key = register()
      assert(checksum(key) == 200)
      Post("/admin/agent/devices/020000000001/delete") ~!> r.route ~> check(assert(status == NoContent))
      assert(checksum(key) == 404)
      assert(counts(r).refused("checksum") == 1)
      assert(checksum(register()) == 200)
      Post("/admin/agent/devices/0200000000ff/delete") ~!> r.route ~> check(assert(status == NotFound))
    }
  }

  "POST /admin/ssh/admits" should {
    "admit the key a device joined with (204), refuse another key or a device that has not joined (403), and answer 400 to a body that is no key check" in {
      val r = Routes()
      val (_, joinedWith) = sshKeys()
      val (_, another) = sshKeys()
      assert(join(r, mac, joinedWith) == 200)
      def admits(body: String): Int = Post("/admin/ssh/admits", json(body)) ~!> r.route ~> check(status.intValue)
      assert(admits(s"""{"user":"$mac","key":"$joinedWith"}""") == 204)
      assert(admits(s"""{"user":"$mac","key":"$another"}""") == 403)
      assert(admits(s"""{"user":"$other","key":"$joinedWith"}""") == 403)
      assert(admits("not json") == 400)
      assert(admits(s"""{"user":"$mac"}""") == 400)
      assert(admits(s"""{"user":"$mac","key":"ssh-ed25519 not-a-key"}""") == 400)
      Post("/admin/ssh/admits", json("{}")) ~!> r.route ~> check {
        assert(responseAs[String] == "expected {user, key} with an OpenSSH public key")
      }
    }
  }

  "POST /admin/config/push" should {
    "publish a new config version on fleet/config, or on each connected device's own topic, naming the document's address" in {
      val r = Routes()
      withBroker(r) { broker =>
        val device = MqttClient.builder().useMqttVersion5().identifier("sensor-1").serverHost("127.0.0.1").serverPort(broker.port).buildBlocking()
        val heard = device.publishes(MqttGlobalPublishFilter.ALL)
        device.connect()
        device.subscribeWith().topicFilter("fleet/config").send()
        device.subscribeWith().topicFilter("devices/sensor-1/config").send()
        def next(): (String, String) =
          val message = heard.receive(10, TimeUnit.SECONDS).orElseThrow(() => AssertionError("no push within 10 s"))
          message.getTopic.toString -> String(message.getPayloadAsBytes, UTF_8)
        Post("/admin/config/push?to=fleet") ~!> r.route ~> check(assert(readFromString[Pushed](responseAs[String]) == Pushed(2, 1)))
        next() match
          case ("fleet/config", s"""{"configSeq":2,"url":"http://127.0.0.1:$port/api/v1/config/2"}""") => assert(port.toIntOption.isDefined)
          case other => fail(s"pushed $other")
        Post("/admin/config/push?to=each") ~!> r.route ~> check(assert(readFromString[Pushed](responseAs[String]) == Pushed(3, 1)))
        val (topic, payload) = next()
        assert(topic == "devices/sensor-1/config" && payload.startsWith("""{"configSeq":3,"url":"http://127.0.0.1:"""))
        assert(r.registry.configSeq == 3 && r.registry.counts.received.getOrElse("config", 0L) == 0) // its own publishes are not counted
        device.disconnect()
      }
    }

    "answer 404 without a broker, and 400 for a `to` other than fleet or each, bumping nothing" in {
      val r = Routes()
      Post("/admin/config/push") ~!> r.route ~> check {
        assert(status == NotFound && responseAs[String] == "this controller runs no MQTT broker (run --transport mqtt)")
      }
      withBroker(r) { _ =>
        Post("/admin/config/push?to=everyone") ~!> r.route ~> check {
          assert(status == BadRequest && responseAs[String] == "to must be fleet (one message on fleet/config) or each (one on each devices/ID/config)")
        }
        Get("/admin/config/push") ~!> r.route ~> check(assert(status == MethodNotAllowed))
        assert(r.registry.configSeq == 1)
      }
    }
  }

  "The admin API" should {
    "refuse a call an SSH gateway carried, though it comes from loopback: a device's tunnel is not an operator" in {
      val r = Routes()
      Get("/admin/counts").addHeader(RawHeader(SshGateway.TunnelledHeader, mac)) ~!> r.route ~> check {
        assert(status == Forbidden && responseAs[String] == "the admin API answers no call that came through an SSH tunnel")
      }
      Post("/admin/config/bump", HttpEntity.Empty).addHeader(RawHeader(SshGateway.TunnelledHeader, mac)) ~!> r.route ~> check(
        assert(status == Forbidden))
      Get("/admin/nothing-here") ~!> r.route ~> check(assert(status == NotFound))
      assert(r.registry.configSeq == 1)
    }
  }
