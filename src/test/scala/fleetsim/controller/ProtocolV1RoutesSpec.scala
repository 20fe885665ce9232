package fleetsim.controller

import com.github.plokhotnyuk.jsoniter_scala.core.readFromString
import fleetsim.protocol.{HeartbeatReply, JoinReply}
import fleetsim.transport.ssh.SshEndpoint
import org.apache.pekko.http.scaladsl.model.StatusCodes.*
import org.apache.pekko.http.scaladsl.model.headers.RawHeader
import org.apache.pekko.http.scaladsl.model.{ContentTypes, HttpEntity}
import org.scalatest.wordspec.AnyWordSpec

/** Protocol v1 under /api/v1, call by call, as a device calls it: what each answers, what it
  * records and counts, and its replies to calls it cannot take.
  */
class ProtocolV1RoutesSpec extends AnyWordSpec with RoutesFixture:
  private val mac = "02:00:00:00:00:01"

  private def joined(r: Routes, macs: String*): Unit =
    macs.foreach(m => Post("/api/v1/join", joinBody(m)) ~!> r.route ~> check(assert(status == OK, responseAs[String])))

  private def heartbeat(seq: Int, uptimeS: Int, state: String = "Reporting", configSeq: Int = 1) =
    json(s"""{"seq":$seq,"uptimeS":$uptimeS,"state":"$state","configSeq":$configSeq}""")

  "POST /api/v1/join" should {
    "record the device as it presents itself and where it called from, and hand it the intervals and config version" in {
      val r = Routes()
      Post("/api/v1/join", joinBody(mac)) ~!> r.route ~> check {
        assert(status == OK && contentType == ContentTypes.`application/json`)
        assert(readFromString[JoinReply](responseAs[String]) == JoinReply(heartbeatIntervalS = 10, statsIntervalS = 30, configSeq = 1, ssh = None))
      }
      val device = r.registry.find(mac).get
      assert((device.serial, device.model, device.firmware, device.address, device.joins) == (s"FS-$mac", "FS-AP-100", "1.0.0", "127.0.0.1", 1))
      joined(r, mac) // a rebooted device joins again: still one device
      assert(r.registry.registered == 1 && device.joins == 2)
      assert(r.controller.counts.received("join") == 2)
    }

    "answer 400 to a body that is not a join or a key that is not an OpenSSH public key, 403 to a forbidden device, 405 to a GET" in {
      val r = Routes()
      for body <- Seq("not json", "{}", s"""{"mac":"$mac","serial":"FS1"}""", """{"mac":1,"serial":"FS1","model":"M","firmware":"1"}""") do
        Post("/api/v1/join", json(body)) ~!> r.route ~> check {
          assert(status == BadRequest, body)
          assert(responseAs[String] == "expected {mac, serial, model, firmware, sshKey?}")
        }
      Post("/api/v1/join", joinBody(mac, sshKey = "ssh-ed25519 not-base64")) ~!> r.route ~> check {
        assert(status == BadRequest && responseAs[String] == "sshKey is not an OpenSSH public key")
      }
      assert(r.registry.registered == 0)
      r.registry.forbid(mac)
      Post("/api/v1/join", joinBody(mac)) ~!> r.route ~> check(assert(status == Forbidden))
      assert(r.registry.registered == 0 && r.controller.counts.refused("join") == 1)
      Get("/api/v1/join") ~!> r.route ~> check(assert(status == MethodNotAllowed))
      assert(r.controller.counts.received("join") == 0)
    }

    "keep the key a device joined with, for its SSH login, and send it to one of the SSH gateways, the same one each time" in {
      val gateways = Seq(SshEndpoint("127.0.0.1", 2201), SshEndpoint("127.0.0.1", 2202))
      val r = Routes(defaults.copy(sshGateways = gateways))
      val (keys, line) = sshKeys()
      def endpoint(m: String, key: String = ""): SshEndpoint =
        Post("/api/v1/join", joinBody(m, key)) ~!> r.route ~> check(readFromString[JoinReply](responseAs[String]).ssh.get)
      assert(gateways.contains(endpoint(mac, line)))
      assert(r.registry.admits(mac, keys.getPublic))
      assert(endpoint(mac) == endpoint(mac))
      val fleet = (1 to 20).map(n => f"02:00:00:00:01:$n%02x")
      assert(fleet.map(endpoint(_)).toSet == gateways.toSet) // the fleet spread over both
    }
  }

  "POST /api/v1/devices/{mac}/heartbeat" should {
    "record a joined device's state and config version and answer the latest config version" in {
      val r = Routes()
      joined(r, mac)
      r.registry.bumpConfig()
      Post(s"/api/v1/devices/$mac/heartbeat", heartbeat(1, 60, state = "Applying", configSeq = 1)) ~!> r.route ~> check {
        assert(status == OK && readFromString[HeartbeatReply](responseAs[String]) == HeartbeatReply(2))
      }
      val device = r.registry.find(mac).get
      assert((device.state, device.configSeq, device.uptimeS) == ("Applying", 1, 60))
      assert(r.controller.counts.received("heartbeat") == 1 && r.controller.counts.tunnelled("heartbeat") == 0)
      // Carried by an SSH gateway in a process of its own, which marks what it forwards.
      val forwarded = Post(s"/api/v1/devices/$mac/heartbeat", heartbeat(2, 70)).addHeader(RawHeader(SshGateway.TunnelledHeader, mac))
      forwarded ~!> r.route ~> check(assert(status == OK))
      assert(r.controller.counts.tunnelled("heartbeat") == 1)
    }

    "still count as seen a heartbeat whose body it cannot read, keeping what the device last reported" in {
      val r = Routes()
      joined(r, mac)
      Post(s"/api/v1/devices/$mac/heartbeat", heartbeat(1, 60, state = "Reporting")) ~!> r.route ~> check(assert(status == OK))
      Post(s"/api/v1/devices/$mac/heartbeat", json("not json")) ~!> r.route ~> check(assert(status == OK))
      assert(r.registry.find(mac).map(_.state).contains("Reporting"))
      assert(r.controller.counts.received("heartbeat") == 2)
    }
  }

  "A device's calls after its join" should {
    "be refused with 403, counted by kind, when it has not joined or was forbidden: it must join again" in {
      val r = Routes()
      val unknown = "02:00:00:00:00:99"
      Post(s"/api/v1/devices/$unknown/heartbeat", heartbeat(1, 1)) ~!> r.route ~> check(assert(status == Forbidden))
      Post(s"/api/v1/devices/$unknown/stats/system", json("{}")) ~!> r.route ~> check(assert(status == Forbidden))
      Get(s"/api/v1/devices/$unknown/config") ~!> r.route ~> check(assert(status == Forbidden))
      joined(r, mac)
      r.registry.forbid(mac)
      r.registry.allow(mac) // allowed again, but forgotten when forbidden: it joins first
      Post(s"/api/v1/devices/$mac/heartbeat", heartbeat(1, 1)) ~!> r.route ~> check(assert(status == Forbidden))
      val counts = r.controller.counts
      assert(counts.refused("heartbeat") == 2 && counts.refused("stats") == 1 && counts.refused("config") == 1)
      assert(counts.received("heartbeat") == 0 && counts.received("stats") == 0 && counts.received("config") == 0)
    }

    "take each stats kind, 404 for a kind protocol v1 does not have, 405 for a GET" in {
      val r = Routes()
      joined(r, mac)
      for kind <- Seq("system", "radio", "clients") do
        Post(s"/api/v1/devices/$mac/stats/$kind", json("""{"cpu":3}""")) ~!> r.route ~> check(assert(status == OK, kind))
      Post(s"/api/v1/devices/$mac/stats/weather", json("{}")) ~!> r.route ~> check {
        assert(status == NotFound && responseAs[String] == "no stats kind 'weather'")
      }
      Get(s"/api/v1/devices/$mac/stats/system") ~!> r.route ~> check(assert(status == MethodNotAllowed))
      assert(r.controller.counts.received("stats") == 3)
    }

    "download the config document, padded to --config-size, the new version's after a bump; 405 for a POST" in {
      val r = Routes(defaults.copy(configBytes = 1000))
      joined(r, mac)
      def document(): String =
        Get(s"/api/v1/devices/$mac/config") ~!> r.route ~> check {
          assert(status == OK && contentType == ContentTypes.`application/json`)
          responseAs[String]
        }
      val first = document()
      assert(first.length == 1000 && first.startsWith("""{"configSeq":1,"""))
      r.registry.bumpConfig()
      assert(document().startsWith("""{"configSeq":2,"""))
      Post(s"/api/v1/devices/$mac/config", HttpEntity.Empty) ~!> r.route ~> check(assert(status == MethodNotAllowed))
      assert(r.controller.counts.received("config") == 2)
    }
  }

  "GET /api/v1/config/{N}" should {
    "serve the document a push names to any caller, with no join, and 404 for any other version" in {
      val r = Routes()
      Get("/api/v1/config/1") ~!> r.route ~> check {
        assert(status == OK && responseAs[String].startsWith("""{"configSeq":1,"""))
      }
      Get("/api/v1/config/2") ~!> r.route ~> check {
        assert(status == NotFound && responseAs[String] == "no config 2: the current one is 1")
      }
      Get("/api/v1/config/latest") ~!> r.route ~> check(assert(status == NotFound))
      assert(r.controller.counts.received("config") == 1)
    }
  }
