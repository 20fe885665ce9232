package fleetsim.controller

import com.github.plokhotnyuk.jsoniter_scala.core.readFromString
import com.hivemq.client.mqtt.MqttClient
import fleetsim.controller.ControllerRoutes.{Dropped, given}
import fleetsim.protocol.JoinReply
import org.apache.pekko.actor.typed.scaladsl.adapter.*
import org.apache.pekko.http.scaladsl.model.StatusCodes.*
import org.apache.pekko.http.scaladsl.server.Route
import org.apache.sshd.client.SshClient
import org.apache.sshd.client.keyverifier.AcceptAllServerKeyVerifier
import org.apache.sshd.client.session.ClientSession.ClientSessionEvent
import org.scalatest.concurrent.Eventually
import org.scalatest.time.{Millis, Seconds, Span}
import org.scalatest.wordspec.AnyWordSpec

import java.net.InetSocketAddress
import java.nio.file.Files
import java.util.concurrent.{CompletableFuture, TimeUnit}
import scala.concurrent.Await
import scala.concurrent.duration.*

/** The fault switches, as a tester flips them through the admin API: what each does to the devices'
  * calls in every dialect, how they are counted, and the settings refused; and the admin calls that
  * drop the devices' SSH sessions and MQTT connections. (Latency: ControllerSpec, over a socket.)
  */
class FaultRoutesSpec extends AnyWordSpec with RoutesFixture with Eventually:
  override given patienceConfig: PatienceConfig = PatienceConfig(Span(10, Seconds), Span(50, Millis))

  private val mac = "02:00:00:00:00:01"

  private def faults(r: Routes): Faults = Get("/admin/faults") ~!> r.route ~> check(readFromString[Faults](responseAs[String]))

  private def put(r: Routes, body: String): (Int, String) =
    Put("/admin/faults", json(body)) ~!> r.route ~> check(status.intValue -> responseAs[String])

  "GET and PUT /admin/faults" should {
    "start with no faults, and take new switches whole: what a PUT leaves out is off" in {
      val r = Routes()
      assert(faults(r) == Faults())
      assert(put(r, """{"errorRate":0.25,"latencyMs":10}""")._1 == 200)
      assert(faults(r) == Faults(errorRate = 0.25, latencyMs = 10))
      val (status, echoed) = put(r, """{"throttleRate":0.5,"retryAfterS":3}""")
      assert(status == 200 && readFromString[Faults](echoed) == Faults(throttleRate = 0.5, retryAfterS = 3))
      assert(faults(r) == Faults(throttleRate = 0.5, retryAfterS = 3))
    }

    "answer 400 to switches that are not JSON or out of range, saying which, and keep the ones set; 405 to a POST or DELETE" in {
      val r = Routes()
      val set = Faults(errorRate = 0.1)
      assert(put(r, """{"errorRate":0.1}""")._1 == 200)
      val expected = "expected {errorRate, latencyMs, throttleRate, retryAfterS}: "
      for (body, says) <- Seq(
          "not json" -> expected,
          """{"latencyMs":"slow"}""" -> expected,
          """{"errorRate":1.5}""" -> "errorRate must be between 0 and 1",
          """{"errorRate":-0.1}""" -> "errorRate must be between 0 and 1",
          """{"errorRate":0.5,"throttleRate":0.6}""" -> "throttleRate must be between 0 and 1 - errorRate",
          """{"throttleRate":-0.5}""" -> "throttleRate must be between 0 and 1 - errorRate",
          """{"latencyMs":-1}""" -> "latencyMs must not be negative",
          """{"retryAfterS":-1}""" -> "retryAfterS must not be negative")
      do
        val (status, reply) = put(r, body)
        assert(status == 400 && reply.startsWith(says), s"$body: $status $reply") // a JSON mistake goes on to say where
        assert(faults(r) == set, body)
      Post("/admin/faults", json("{}")) ~!> r.route ~> check(assert(status == MethodNotAllowed))
      Delete("/admin/faults") ~!> r.route ~> check(assert(status == MethodNotAllowed))
    }
  }

  "The fault switches" should {
    "at errorRate 1, answer every device call 500 in every dialect, counted by kind as injected, and nothing else done; admin calls as usual" in {
      val r = Routes()
      Post("/api/v1/join", joinBody(mac)) ~!> r.route ~> check(assert(status == OK))
      assert(put(r, """{"errorRate":1}""")._1 == 200)
      Post("/api/v1/join", joinBody("02:00:00:00:00:02")) ~!> r.route ~> check {
        assert(status == InternalServerError && responseAs[String] == "injected fault")
      }
      Post(s"/api/v1/devices/$mac/heartbeat", json("""{"seq":1,"uptimeS":5,"state":"Reporting","configSeq":1}""")) ~!> r.route ~> check(
        assert(status == InternalServerError))
      Get(s"/api/v1/devices/$mac/config") ~!> r.route ~> check(assert(status == InternalServerError))
      Post("/iot/v1/token-1/telemetry", json("""{"t":21.5}""")) ~!> r.route ~> check(assert(status == InternalServerError))
      Get("/iot/v1/token-1/attributes") ~!> r.route ~> check(assert(status == InternalServerError))
      Post("/agent/register", agentRegistration("02:00:00:00:00:03")) ~!> r.route ~> check(assert(status == InternalServerError))
      val counts = r.controller.counts
      assert(counts.injectedErrors == Map("join" -> 2, "heartbeat" -> 1, "stats" -> 0, "config" -> 1, "attributes" -> 1, "telemetry" -> 1))
      assert(counts.received == Map("join" -> 1, "heartbeat" -> 0, "stats" -> 0, "config" -> 0)) // the join before the switch
      assert(r.registry.registered == 1 && r.registry.find(mac).get.state == "")
      assert(put(r, "{}")._1 == 200) // all off
      Post("/api/v1/join", joinBody("02:00:00:00:00:02")) ~!> r.route ~> check(assert(status == OK))
    }

    "at throttleRate 1, answer 429 with the Retry-After set, counted as injected" in {
      val r = Routes()
      assert(put(r, """{"throttleRate":1,"retryAfterS":7}""")._1 == 200)
      Post("/api/v1/join", joinBody(mac)) ~!> r.route ~> check {
        assert(status == TooManyRequests && header("Retry-After").map(_.value).contains("7"))
      }
      assert(r.controller.counts.injectedErrors("join") == 1 && r.registry.registered == 0)
    }

    "split the calls they fail between 500s and 429s as the two rates say, and answer the rest" in {
      val r = Routes()
      assert(put(r, """{"errorRate":0.5,"throttleRate":0.5}""")._1 == 200)
      val answers = (1 to 60).map(n => Post("/api/v1/join", joinBody(f"02:00:00:00:02:$n%02x")) ~!> r.route ~> check(status.intValue))
      assert(answers.toSet == Set(500, 429)) // each at one chance in two: all of one kind 60 times would be one in 2^59
      assert(r.controller.counts.injectedErrors("join") == 60)
      assert(put(r, """{"errorRate":0.5}""")._1 == 200)
      val some = (1 to 60).map(n => Post("/api/v1/join", joinBody(f"02:00:00:00:03:$n%02x")) ~!> r.route ~> check(status.intValue))
      assert(some.toSet == Set(500, 200))
      assert(r.registry.registered == some.count(_ == 200))
    }
  }

  "POST /admin/ssh/drop" should {
    "close that fraction of the open SSH sessions (all by default) and say how many; 404 without an SSH server, 400 for a fraction that is no number" in {
      val r = Routes()
      Post("/admin/ssh/drop") ~!> r.route ~> check {
        assert(status == NotFound && responseAs[String] == "this controller runs no SSH server")
      }
      Post("/admin/ssh/drop?fraction=half") ~!> r.route ~> check(assert(status == BadRequest))
      val settings = defaults.copy(stateDir = Files.createTempDirectory("fleetsim-controller"))
      val gateway = Await.result(SshGateway.start(settings, InetSocketAddress("127.0.0.1", 9), r.registry, Route.toFlow(r.route))(using
        system.toTyped), 30.seconds)
      r.controller.gateway = Some(gateway)
      val client = SshClient.setUpDefaultClient()
      client.setServerKeyVerifier(AcceptAllServerKeyVerifier.INSTANCE)
      client.start()
      try
        val (keys, line) = sshKeys()
        val ssh = Post("/api/v1/join", joinBody(mac, line)) ~!> r.route ~> check(readFromString[JoinReply](responseAs[String]).ssh.get)
        assert(ssh.port == gateway.address.getPort) // the device is sent to this controller's own SSH server
        val session = client.connect(mac, ssh.host, ssh.port).verify(10, TimeUnit.SECONDS).getSession
        session.addPublicKeyIdentity(keys)
        session.auth().verify(10, TimeUnit.SECONDS)
        eventually(assert(r.controller.counts.sshSessions == 1))
        Post("/admin/ssh/drop?fraction=0") ~!> r.route ~> check(assert(readFromString[Dropped](responseAs[String]) == Dropped(0)))
        assert(session.isOpen)
        Post("/admin/ssh/drop") ~!> r.route ~> check(assert(readFromString[Dropped](responseAs[String]) == Dropped(1)))
        assert(session.waitFor(java.util.List.of(ClientSessionEvent.CLOSED), 10000L).contains(ClientSessionEvent.CLOSED))
        eventually(assert(r.controller.counts.sshSessions == 0))
      finally
        client.stop()
        Await.result(gateway.stop(), 10.seconds)
    }
  }

  "POST /admin/mqtt/drop" should {
    "close every device's MQTT connection at once and say how many; 404 without a broker" in {
      val r = Routes()
      Post("/admin/mqtt/drop") ~!> r.route ~> check {
        assert(status == NotFound && responseAs[String] == "this controller runs no MQTT broker (run --transport mqtt)")
      }
      withBroker(r) { broker =>
        val lost = CompletableFuture[Unit]()
        val device = MqttClient.builder().useMqttVersion5().identifier("sensor-1").serverHost("127.0.0.1").serverPort(broker.port)
          .addDisconnectedListener(_ => lost.complete(())).buildBlocking()
        device.connect()
        Post("/admin/mqtt/drop") ~!> r.route ~> check(assert(readFromString[Dropped](responseAs[String]) == Dropped(1)))
        lost.get(10, TimeUnit.SECONDS)
        Post("/admin/mqtt/drop") ~!> r.route ~> check(assert(readFromString[Dropped](responseAs[String]) == Dropped(0)))
      }
    }
  }
