package fleetsim.transport.mqtt

import fleetsim.controller.{MqttBroker, Registry}
import fleetsim.e2e.{Mosquitto, freePort}
import fleetsim.transport.*
import org.scalatest.concurrent.Eventually
import org.scalatest.time.{Millis, Seconds, Span}
import org.scalatest.wordspec.AnyWordSpec

import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.Files
import java.util.concurrent.{LinkedBlockingQueue, TimeUnit}
import scala.concurrent.duration.*
import scala.concurrent.{Await, ExecutionContext, Future}
import scala.jdk.CollectionConverters.*

/** MQTT devices' sessions against real brokers on 127.0.0.1: the reference controller's embedded
  * Moquette, and Debian's mosquitto where a test needs a password file, a broker that stops
  * answering, or its log. What a device gets from each open, send and close, as the fleet counts it.
  */
class MqttSessionsSpec extends AnyWordSpec with Eventually:
  override given patienceConfig: PatienceConfig = PatienceConfig(Span(10, Seconds), Span(50, Millis))
  private given ExecutionContext = ExecutionContext.global

  private val dir = Files.createTempDirectory("fleetsim-mqtt-sessions")
  private val telemetry = MessageKind("telemetry", 0, periodic = true)
  private val deadline = 10.seconds

  private def options(version: Int = 5, maxInFlight: Int = 16, password: Option[String] = None): MqttOptions =
    MqttOptions(version, keepAlive = 30.seconds, cleanStart = true, sessionExpiry = 0.seconds, maxInFlight = maxInFlight, pushQos = 1,
      willQos = 0, willRetain = false,
      identity = n => MqttIdentity(s"sensor-$n", password.map(_ => s"sensor-$n"), password.map(_.getBytes(UTF_8)), Seq(s"devices/sensor-$n/config"), None))

  /** The address the devices call from: the broker's connections from it are theirs alone. */
  private val source = "127.0.7.8"

  /** A connect and a reply (a CONNACK among them) have 10 s unless a test of timeouts says: a JVM's
    * first connect to a broker just started, beside the suite's others, waited over 2 s for its CONNACK in CI.
    */
  private def sessions(port: Int, options: MqttOptions, devices: Int = 1, requestTimeout: FiniteDuration = 10.seconds,
      connectTimeout: FiniteDuration = 10.seconds): MqttSessions =
    MqttSessions("127.0.0.1", port, options, tls = None, sources = SourceAddresses.parse(source).toOption, connectTimeout = connectTimeout, requestTimeout = requestTimeout,
      fleetsim.transport.IoThreads.loopsFor(devices, None, fleetsim.transport.IoThreads.Owned))

  /** Device `n`'s session, or why it could not open; pushes to it go to `pushed`. */
  private def open(s: MqttSessions, n: Int, pushed: Push => Unit = _ => ()): Either[SessionFailure, Session] =
    Await.result(s.open(n, s"sensor-$n", None, pushed), deadline)

  /** Device `n`'s session, opened; a test that needs it fails saying why it did not open. A connect
    * the embedded broker dropped between its CONNACK and the SUBACK is tried again, as a device
    * would ([[MqttSessions]]' closedEarly says why Moquette does that).
    */
  private def opened(s: MqttSessions, n: Int, pushed: Push => Unit = _ => ()): Session =
    def attempt(left: Int): Session = open(s, n, pushed) match
      case Right(session) => session
      case Left(SessionFailure.Failed(FailureReason.ProtocolError)) if left > 0 => attempt(left - 1)
      case Left(f) => fail(s"device $n's session did not open: $f")
    attempt(2)

  private def publish(n: Int, qos: Int = 1): Request =
    Request(telemetry, "PUBLISH", s"devices/sensor-$n/telemetry", Array.emptyByteArray, """{"t":21.5}""".getBytes(UTF_8), qos)

  private def delivered(reply: Reply): Boolean = reply match
    case r: Reply.Response => r.status == 200
    case _: Reply.Failed => false

  private def withEmbedded(test: (MqttBroker, Registry) => Unit): Unit =
    val registry = Registry()
    val broker = MqttBroker.start("127.0.0.1", 0, registry)
    try test(broker, registry) finally broker.stop()

  "A device's MQTT session" should {
    for version <- Seq(5, 3) do
      s"(MQTT ${if version == 5 then "5" else "3.1.1"}) connect, deliver its publishes at QoS 1 and 0 to the broker, which counts them, and hand the device what is pushed on its topic" in
        withEmbedded { (broker, registry) =>
          val s = sessions(broker.port, options(version))
          val pushes = LinkedBlockingQueue[Push]()
          try
            val session = opened(s, 0, pushes.add)
            assert(delivered(Await.result(session.send(0, publish(0, qos = 1)), deadline)))
            assert(delivered(Await.result(session.send(0, publish(0, qos = 0)), deadline)))
            eventually(assert(registry.counts.received.get("telemetry").contains(2L)))
            assert(broker.pushEach("""{"configSeq":2}""") == 1) // the broker knows the device by its client id
            val push = Option(pushes.poll(deadline.toSeconds, TimeUnit.SECONDS)).getOrElse(fail("no push within the deadline"))
            assert(push.topic == "devices/sensor-0/config" && String(push.payload, UTF_8) == """{"configSeq":2}""")
            Await.result(session.close(), deadline)
          finally Await.result(s.close(), deadline)
        }

    "fail a connect whose password the broker refuses as unauthorized, in MQTT 5 and 3.1.1, and connect the device whose is right" in {
      val passwords = Mosquitto.passwordFile(dir, Seq("sensor-0" -> "secret", "sensor-1" -> "secret"))
      Mosquitto.around(dir, s"allow_anonymous false\npassword_file $passwords") { mosquitto =>
        for version <- Seq(5, 3) do
          val wrong = sessions(mosquitto.port, options(version, password = Some("wrong")), devices = 2)
          val right = sessions(mosquitto.port, options(version, password = Some("secret")), devices = 2)
          try
            assert(open(wrong, 0) == Left(SessionFailure.Refused(FailureReason.Unauthorized)), s"MQTT $version")
            val session = open(right, 1)
            assert(session.isRight, s"MQTT $version: $session")
            session.foreach(t => Await.result(t.close(), deadline))
          finally Await.result(Future.sequence(Seq(wrong.close(), right.close())), deadline)
        assert(mosquitto.identities == Set("sensor-1"))
      }
    }

    "fail a connect to a port nobody listens on as connectFailed, and one to a broker that never answers as timedOut, in time" in {
      val closed = sessions(freePort(), options())
      try assert(open(closed, 0) == Left(SessionFailure.Failed(FailureReason.ConnectFailed)))
      finally Await.result(closed.close(), deadline)
      Mosquitto.around(dir, "allow_anonymous true") { mosquitto =>
        mosquitto.pause() // the kernel takes the connection; no CONNACK comes
        val hung = sessions(mosquitto.port, options(), requestTimeout = 1.second, connectTimeout = 2.seconds)
        try
          val start = System.nanoTime()
          assert(open(hung, 0) == Left(SessionFailure.Failed(FailureReason.TimedOut)))
          assert((System.nanoTime() - start).nanos < 6.seconds) // its deadline: the connect timeout plus two request timeouts (4 s), and some slack
        finally
          mosquitto.resume()
          Await.result(hung.close(), deadline)
      }
    }

    "fail a publish past maxInFlight unacknowledged ones as overloaded at once, and one whose PUBACK does not come as timedOut" in
      Mosquitto.around(dir, "allow_anonymous true") { mosquitto =>
        val s = sessions(mosquitto.port, options(maxInFlight = 1), requestTimeout = 1.second)
        try
          val session = opened(s, 0)
          mosquitto.pause()
          val waiting = session.send(0, publish(0))
          assert(Await.result(session.send(0, publish(0)), deadline) == Reply.Failed(FailureReason.Overloaded))
          assert(Await.result(waiting, deadline) == Reply.Failed(FailureReason.TimedOut))
          mosquitto.resume()
          eventually(assert(delivered(Await.result(session.send(0, publish(0)), deadline)))) // the slot is free once the client is done with it
        finally
          mosquitto.resume()
          Await.result(s.close(), deadline)
      }

    "notice a connection the broker drops, and then fail its publishes at once" in
      withEmbedded { (broker, _) =>
        val s = sessions(broker.port, options(), requestTimeout = 3.seconds)
        try
          val session = opened(s, 0)
          assert(!session.lost.isCompleted)
          assert(broker.dropAll() == 1)
          Await.result(session.lost, deadline)
          for _ <- 1 to 20 do // not after the request timeout (3 s): the client, still settling its state after the loss, would hold some
            assert(Await.result(session.send(0, publish(0)), 1.second) == Reply.Failed(FailureReason.ProtocolError))
        finally Await.result(s.close(), deadline)
      }

    "notice a broker that goes away" in
      Mosquitto.around(dir, "allow_anonymous true") { mosquitto =>
        val s = sessions(mosquitto.port, options())
        try
          val session = opened(s, 0)
          mosquitto.stop()
          Await.result(session.lost, deadline)
        finally Await.result(s.close(), deadline)
      }
  }

  "Closing" should {
    "end a device's connection at the broker with a DISCONNECT, and, once the devices have closed, stop the sessions' event loops" in
      Mosquitto.around(dir, "allow_anonymous true") { mosquitto =>
        def loops = Thread.getAllStackTraces.keySet.asScala.filter(_.getName.startsWith("fleetsim-mqtt-io")).toSet
        val before = loops
        val s = sessions(mosquitto.port, options(), devices = 3)
        val three = (0 until 3).map(opened(s, _))
        val ours = loops -- before
        assert(ours.nonEmpty && ours.forall(_.isAlive))
        eventually(assert(mosquitto.clientConnections(source) == 3))
        Await.result(three.head.close(), deadline)
        eventually(assert(mosquitto.clientConnections(source) == 2))
        eventually(assert(Files.readString(mosquitto.log).contains("Client sensor-0 disconnected.")))
        three.tail.foreach(t => Await.result(t.close(), deadline))
        Await.result(s.close(), deadline)
        eventually(assert(mosquitto.clientConnections(source) == 0))
        eventually(assert(ours.forall(!_.isAlive)))
        assert("Client sensor-\\d+ closed its connection".r.findFirstIn(Files.readString(mosquitto.log)).isEmpty) // each said goodbye, none vanished
      }
  }
