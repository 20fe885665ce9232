package fleetsim.device

import com.github.plokhotnyuk.jsoniter_scala.core.*
import fleetsim.fleet.FleetSettings
import fleetsim.profile.{FleetContext, ProfileLoader}
import fleetsim.protocol.*
import fleetsim.transport.{FailureReason, MessageKind, Reply, Request, Session, SessionFailure, SessionOffer, Sessions, Transport, Push}
import org.apache.pekko.Done
import org.apache.pekko.util.ByteString
import org.apache.pekko.actor.testkit.typed.scaladsl.{ScalaTestWithActorTestKit, TestProbe}
import org.apache.pekko.actor.typed.ActorRef
import org.apache.pekko.actor.typed.scaladsl.Behaviors
import org.apache.pekko.actor.typed.scaladsl.adapter.*
import org.scalatest.wordspec.AnyWordSpecLike

import java.nio.charset.StandardCharsets.UTF_8
import java.util.random.RandomGenerator
import scala.concurrent.duration.*
import scala.concurrent.{Future, Promise}

/** The device state machine, one transition at a time: a scripted transport answers each call,
  * and the devices' clock, which the timing wheel reads, is stepped by hand.
  */
class DeviceSpec extends ScalaTestWithActorTestKit with AnyWordSpecLike:
  import DeviceState.*

  @volatile private var now = 0L
  private val wheel = TimingWheel(() => now)
  override def afterAll(): Unit =
    wheel.close()
    super.afterAll()
  private def pass(d: FiniteDuration): Unit = now += d.toNanos
  /** Steps the clock and checks that nothing comes: the wheel's ticker sees the step within a tick. */
  private def quietFor[A](d: FiniteDuration, probe: TestProbe[A]): Unit =
    pass(d)
    probe.expectNoMessage(50.millis)
  private val settings = DeviceSettings(maxLostHeartbeats = 3, jitter = 0.1, backoff = BackoffSettings(1.second, 60.seconds))
  /** Device 7 of a fleet of ap-v1 access points: who it says it is at join. */
  private val identity = JoinRequest("02:00:00:00:00:07", "FS0000000007", "FS-AP-100", "1.0.0")
  private def apV1(sshKey: Option[String], name: String = "ap-v1") =
    val config = com.typesafe.config.ConfigFactory.load()
    ProfileLoader.load(name, FleetContext(FleetSettings(config), sshKey, config))
  /** ap-v1 with heartbeats whose replies keep nothing, as MQTT publishes' do: their Ok replies never reach the device. */
  private lazy val quietHeartbeats =
    val file = java.nio.file.Files.createTempFile("quiet-heartbeats", ".conf")
    file.toFile.deleteOnExit()
    val text = ProfileLoader.builtInText("ap-v1").get
    val keep = """keep { configSeq { json = "/configSeq", default = 0 } }"""
    assert(text.contains(keep))
    java.nio.file.Files.writeString(file, text.replace(keep, ""))
    file.toString
  /** Always 0.5: phases land mid-interval, jitter is zero, a backoff is half its ceiling. */
  private val half: RandomGenerator = () => Long.MinValue // nextDouble() takes the top 53 bits: 0.5

  private final case class Call(request: Request, reply: Promise[Reply]):
    def answer(r: Reply): Unit = reply.success(r)
    def ok[A: JsonValueCodec](body: A): Unit = answer(Reply.Response(200, writeToArray(body)))
    def bodyAs[A: JsonValueCodec]: A = readFromArray[A](request.body)

  private val Forbidden = Reply.Response(403, Array.emptyByteArray)
  /** The part of a config document the device reads. */
  private final case class ConfigHeader(configSeq: Long)
  private given JsonValueCodec[ConfigHeader] = com.github.plokhotnyuk.jsoniter_scala.macros.JsonCodecMaker.make

  private final case class Moved(from: Option[DeviceState], to: DeviceState)

  private final class ScriptedTransport(calls: ActorRef[Call]) extends Transport:
    def send(device: Int, request: Request): Future[Reply] =
      val reply = Promise[Reply]()
      calls ! Call(request, reply)
      reply.future
    def close(): Future[Done] = Future.successful(Done)

  /** Sessions (SSH tunnels, as far as the device can tell) the test opens and breaks by hand; every
    * call through one goes to the same probe.
    */
  private final class ScriptedTunnels(opens: ActorRef[Promise[Either[SessionFailure, Session]]], calls: ActorRef[Call]) extends Sessions:
    def open(device: Int, login: String, offered: Option[SessionOffer], pushed: Push => Unit): Future[Either[SessionFailure, Session]] =
      val opened = Promise[Either[SessionFailure, Session]]()
      opens ! opened
      opened.future
    def close(): Future[Done] = Future.successful(Done)

  private final class ScriptedTunnel(calls: ActorRef[Call]) extends Session:
    val broken = Promise[Done]()
    @volatile var closed = false
    private val through = ScriptedTransport(calls)
    def send(device: Int, request: Request): Future[Reply] = through.send(device, request)
    def lost: Future[Done] = broken.future
    def close(): Future[Done] =
      closed = true
      Future.successful(Done)

  private final class Probed(moves: ActorRef[Moved], halts: ActorRef[String], judgements: ActorRef[(Int, Option[FailureReason])],
      actions: ActorRef[(String, Int, Long)]) extends DeviceEvents:
    def moved(from: Option[DeviceState], to: DeviceState): Unit = moves ! Moved(from, to)
    def stopped(state: DeviceState): Unit = ()
    def late(kind: MessageKind, nanos: Long): Unit = ()
    def judged(kind: MessageKind, reply: Reply.Response, failure: Option[FailureReason]): Unit = judgements ! (reply.status -> failure)
    def halted(reason: String): Unit = halts ! reason
    def pushed(): Unit = ()
    def pushAcknowledged(nanos: Long): Unit = ()
    def cut(action: Int): Unit = actions ! ("cut", action, 0L)
    def recovered(action: Int, nanos: Long): Unit = actions ! ("recovered", action, nanos)

  private class Fixture(withTunnels: Boolean = false, profile: String = "ap-v1"):
    val calls = TestProbe[Call]()
    val moves = TestProbe[Moved]()
    val opens = TestProbe[Promise[Either[SessionFailure, Session]]]()
    val tunnelCalls = TestProbe[Call]()
    val halts = TestProbe[String]()
    val judgements = TestProbe[(Int, Option[FailureReason])]()
    val actions = TestProbe[(String, Int, Long)]()
    private val tunnels = Option.when(withTunnels)(ScriptedTunnels(opens.ref, tunnelCalls.ref))
    private val shared = Device.Shared(apV1(tunnels.map(_ => "ecdsa-sha2-nistp256 AAAA"), profile), settings, ScriptedTransport(calls.ref), tunnels, Probed(moves.ref, halts.ref, judgements.ref, actions.ref), wheel, Draws.fixed(half), () => now)
    /** A device is a classic actor, made by a parent as the fleet makes it. */
    val device: ActorRef[Device.Command] =
      val made = TestProbe[ActorRef[Device.Command]]()
      spawn(Behaviors.setup[Nothing] { context =>
        made.ref ! context.toClassic.actorOf(Device.props(7, shared)).toTyped[Device.Command]
        Behaviors.empty
      })
      made.receiveMessage()
    moves.expectMessage(Moved(None, Discovering))

    /** Joins, opens a tunnel and downloads the config through it: Reporting, with the tunnel returned. */
    def joinAndTunnel(): ScriptedTunnel =
      val join = nextCall(ApiCall.Join)
      assert(join.bodyAs[JoinRequest].sshKey.contains("ecdsa-sha2-nistp256 AAAA"))
      join.ok(JoinReply(10, 1000, configSeq = 1))
      expectMove(Discovering, Tunneling)
      val tunnel = ScriptedTunnel(tunnelCalls.ref)
      opens.expectMessageType[Promise[Either[SessionFailure, Session]]].success(Right(tunnel))
      expectMove(Tunneling, ConfigDownloading)
      val download = tunnelCalls.expectMessageType[Call]
      assert(download.request.kind.key == ApiCall.Config.key)
      download.ok(ConfigHeader(1))
      expectMove(ConfigDownloading, Reporting)
      tunnel

    def nextCall(kind: ApiCall): Call = next(kind.key)

    def next(kind: String): Call =
      val call = calls.expectMessageType[Call]
      assert(call.request.kind.key == kind, s"expected a $kind call, got ${call.request}")
      call

    def expectMove(from: DeviceState, to: DeviceState): Unit = moves.expectMessage(Moved(Some(from), to))

    /** Steps time 100 ms at a time until `probe` gets something: how much time that took. For a
      * retry whose timer the device sets on a reply, with nothing visible to wait on first.
      */
    def timeUntil[A](probe: TestProbe[A], step: FiniteDuration = 100.millis, max: FiniteDuration = 10.seconds): (FiniteDuration, A) =
      Iterator.iterate(step)(_ + step).takeWhile(_ <= max).map { elapsed =>
        pass(step)
        elapsed -> scala.util.Try(probe.receiveMessage(200.millis)).toOption
      }.collectFirst { case (elapsed, Some(got)) => elapsed -> got }.getOrElse(fail(s"nothing within $max"))

    /** Joins with config seq 1 and downloads it: the device ends up Reporting with seq 1. */
    def joinAndDownload(heartbeatS: Int = 10, statsS: Int = 1000): Unit =
      nextCall(ApiCall.Join).ok(JoinReply(heartbeatS, statsS, configSeq = 1))
      expectMove(Discovering, ConfigDownloading)
      nextCall(ApiCall.Config).ok(ConfigHeader(1))
      expectMove(ConfigDownloading, Reporting)

    def heartbeatDue(heartbeatS: Int = 10): Call =
      pass((heartbeatS * 1000 / 2).millis) // phase 0.5 of the interval
      nextCall(ApiCall.Heartbeat)

  "A device" should {
    "join, download the announced config and report it in its heartbeats" in new Fixture:
      val join = nextCall(ApiCall.Join)
      assert(join.bodyAs[JoinRequest] == identity.copy(sshKey = Some(""))) // no tunnels, no key
      join.ok(JoinReply(10, 30, configSeq = 1))
      expectMove(Discovering, ConfigDownloading)
      val download = nextCall(ApiCall.Config)
      assert(download.request.path == s"/api/v1/devices/${identity.mac}/config" && download.request.body.isEmpty)
      download.ok(ConfigHeader(1))
      expectMove(ConfigDownloading, Reporting)
      val beat = heartbeatDue()
      assert(beat.bodyAs[Heartbeat].configSeq == 1)
      assert(beat.bodyAs[Heartbeat].seq == 1)
      assert(beat.bodyAs[Heartbeat].state == "Reporting")

    "send a stats round as one POST per kind" in new Fixture:
      joinAndDownload(heartbeatS = 100, statsS = 30) // the heartbeat's phase (50 s) comes after the stats' (15 s)
      pass(15.seconds)
      val round = (1 to 3).map(_ => nextCall(ApiCall.Stats))
      assert(round.map(_.request.path).toSet == StatsKind.values.map(k => s"/api/v1/devices/${identity.mac}/stats/${k.key}").toSet)

    "go to ConfigDownloading when a heartbeat reply announces a newer config, then report the new seq" in new Fixture:
      joinAndDownload()
      heartbeatDue().ok(HeartbeatReply(2))
      expectMove(Reporting, ConfigDownloading)
      nextCall(ApiCall.Config).ok(ConfigHeader(2))
      expectMove(ConfigDownloading, Reporting)
      pass(10.seconds)
      assert(nextCall(ApiCall.Heartbeat).bodyAs[Heartbeat].configSeq == 2)

    "back off after a failed join, then join again" in new Fixture:
      nextCall(ApiCall.Join).answer(Reply.Failed(FailureReason.ConnectFailed))
      expectMove(Discovering, Backoff)
      quietFor(400.millis, calls) // first backoff: uniform in [0, 1 s], here 0.5 s
      pass(100.millis)
      expectMove(Backoff, Discovering)
      nextCall(ApiCall.Join)

    "stay Discovering and ask again later when the join is refused" in new Fixture:
      nextCall(ApiCall.Join).answer(Forbidden)
      val (after, again) = timeUntil(calls)
      assert(again.request.kind.key == ApiCall.Join.key)
      assert(after >= 500.millis && after <= 600.millis) // the first retry: half of 1 s, here
      moves.expectNoMessage(50.millis)

    "return to Discovering with its state reset on 403 from a heartbeat" in new Fixture:
      joinAndDownload()
      heartbeatDue().answer(Forbidden)
      expectMove(Reporting, Discovering)
      // It forgot its config: seq 1 is new to it again.
      nextCall(ApiCall.Join).ok(JoinReply(10, 30, configSeq = 1))
      expectMove(Discovering, ConfigDownloading)

    "return to Discovering on 403 from a stats call" in new Fixture:
      joinAndDownload(heartbeatS = 100, statsS = 30)
      pass(15.seconds)
      nextCall(ApiCall.Stats).answer(Forbidden)
      expectMove(Reporting, Discovering)

    "authenticate again on 401, keeping the config it applied" in new Fixture:
      joinAndDownload()
      heartbeatDue().answer(Reply.Response(401, Array.emptyByteArray))
      expectMove(Reporting, Discovering)
      nextCall(ApiCall.Join).ok(JoinReply(10, 30, configSeq = 1))
      expectMove(Discovering, Reporting) // seq 1 still applied: no download

    "wait what Retry-After says when the controller answers 429, not its interval" in new Fixture:
      joinAndDownload()
      val throttled = ByteString("HTTP/1.1 429 Too Many Requests\r\nRetry-After: 25")
      heartbeatDue().answer(Reply.Response(429, Array.emptyByteArray, throttled))
      val (after, next) = timeUntil(calls, step = 1.second, max = 40.seconds)
      assert(next.request.kind.key == ApiCall.Heartbeat.key)
      assert(after >= 25.seconds && after <= 26.seconds) // not 10 s later, when it was due; a step late at most
      moves.expectNoMessage(50.millis) // still Reporting: a pause is not a failure

    "back off after the configured number of heartbeats lost in a row, not before" in new Fixture:
      joinAndDownload()
      heartbeatDue().answer(Reply.Failed(FailureReason.TimedOut))
      pass(10.seconds)
      nextCall(ApiCall.Heartbeat).answer(Reply.Failed(FailureReason.Rejected))
      moves.expectNoMessage(50.millis)
      pass(10.seconds)
      nextCall(ApiCall.Heartbeat).answer(Reply.Failed(FailureReason.TimedOut))
      expectMove(Reporting, Backoff)

    "reset its count of lost heartbeats when one gets through" in new Fixture:
      joinAndDownload()
      heartbeatDue().answer(Reply.Failed(FailureReason.TimedOut))
      for _ <- 1 to 2 do
        pass(10.seconds)
        nextCall(ApiCall.Heartbeat).answer(Reply.Failed(FailureReason.TimedOut))
        pass(10.seconds)
        nextCall(ApiCall.Heartbeat).ok(HeartbeatReply(1))
      moves.expectNoMessage(50.millis)

    "count lost heartbeats whose Ok replies keep nothing, though those replies never reach it" in new Fixture(profile = quietHeartbeats):
      joinAndDownload()
      heartbeatDue().answer(Reply.Failed(FailureReason.TimedOut))
      for _ <- 1 to 2 do // an Ok after a failure comes back: it resets the count
        pass(10.seconds)
        nextCall(ApiCall.Heartbeat).answer(Reply.Failed(FailureReason.TimedOut))
        pass(10.seconds)
        nextCall(ApiCall.Heartbeat).answer(Reply.Response(200, Array.emptyByteArray))
      for _ <- 1 to 2 do // Ok after Ok stays with the transport
        pass(10.seconds)
        nextCall(ApiCall.Heartbeat).answer(Reply.Response(200, Array.emptyByteArray))
      moves.expectNoMessage(50.millis)
      for _ <- 1 to 3 do
        pass(10.seconds)
        nextCall(ApiCall.Heartbeat).answer(Reply.Failed(FailureReason.TimedOut))
      expectMove(Reporting, Backoff)

    "try a failed config download again with its next heartbeat, when heartbeat replies keep nothing" in new Fixture(profile = quietHeartbeats):
      nextCall(ApiCall.Join).ok(JoinReply(10, 1000, configSeq = 1))
      expectMove(Discovering, ConfigDownloading)
      nextCall(ApiCall.Config).answer(Reply.Response(500, Array.emptyByteArray))
      expectMove(ConfigDownloading, Reporting) // unapplied
      heartbeatDue().answer(Reply.Response(200, Array.emptyByteArray))
      expectMove(Reporting, ConfigDownloading)
      nextCall(ApiCall.Config).ok(ConfigHeader(1))
      expectMove(ConfigDownloading, Reporting)

    "open its own tunnel after joining, and send everything but the join through it" in new Fixture(withTunnels = true):
      joinAndTunnel()
      pass(5.seconds)
      assert(tunnelCalls.expectMessageType[Call].request.kind.key == ApiCall.Heartbeat.key)
      calls.expectNoMessage(50.millis) // nothing over plain HTTP

    "re-tunnel after a jittered pause when its tunnel is lost" in new Fixture(withTunnels = true):
      val tunnel = joinAndTunnel()
      tunnel.broken.success(Done)
      expectMove(Reporting, Tunneling)
      quietFor(400.millis, opens) // the pause: uniform in [0, 1 s], here 0.5 s
      pass(100.millis)
      opens.expectMessageType[Promise[Either[SessionFailure, Session]]].success(Right(ScriptedTunnel(tunnelCalls.ref)))
      expectMove(Tunneling, Reporting) // config already applied: no download
      calls.expectNoMessage(50.millis) // no rejoin

    "close its tunnel and re-tunnel, not rejoin, after heartbeats lost through it" in new Fixture(withTunnels = true):
      val tunnel = joinAndTunnel()
      pass(5.seconds)
      for i <- 1 to 3 do
        if i > 1 then pass(10.seconds)
        val beat = tunnelCalls.expectMessageType[Call]
        assert(beat.request.kind.key == ApiCall.Heartbeat.key)
        beat.answer(Reply.Failed(FailureReason.TimedOut))
      expectMove(Reporting, Tunneling)
      assert(tunnel.closed)

    "power off without a word, its tunnel dropped and nothing sent, then on again as after a reboot" in new Fixture(withTunnels = true):
      val tunnel = joinAndTunnel()
      device ! Device.Power(0, 7, on = false) // devices 0 to 6: not this one
      device ! Device.Power(7, 8, on = false)
      expectMove(Reporting, Off)
      assert(tunnel.closed)
      quietFor(60.seconds, tunnelCalls)
      calls.expectNoMessage(50.millis)
      device ! Device.Restart // for Stopped devices only
      moves.expectNoMessage(50.millis)
      device ! Device.Power(7, 8, on = true)
      expectMove(Off, Discovering)
      nextCall(ApiCall.Join).ok(JoinReply(10, 1000, configSeq = 1))
      expectMove(Discovering, Tunneling)

    "tell how long it took to be Reporting again after an action cut its power, powered on by that action only" in new Fixture(withTunnels = true):
      joinAndTunnel()
      device ! Device.Power(7, 8, on = false, cause = 2)
      expectMove(Reporting, Off)
      actions.expectMessage(("cut", 2, 0L))
      device ! Device.Power(0, 100, on = false) // a resize takes it over: the action's end leaves it Off
      device ! Device.Power(7, 8, on = true, cause = 2)
      moves.expectNoMessage(50.millis)
      device ! Device.Power(7, 8, on = false, cause = 3) // already Off: not cut again
      device ! Device.Power(7, 8, on = true) // the fleet grows back
      expectMove(Off, Discovering)
      pass(3.seconds)
      joinAndTunnel()
      actions.expectNoMessage(50.millis) // a resize's devices have no recovery
      device ! Device.Power(0, 8, on = false, cause = 4)
      expectMove(Reporting, Off)
      actions.expectMessage(("cut", 4, 0L))
      device ! Device.Power(7, 8, on = true, cause = 5) // another action's power-on
      moves.expectNoMessage(50.millis)
      pass(10.seconds) // Off: not part of its recovery
      device ! Device.Power(7, 8, on = true, cause = 4)
      expectMove(Off, Discovering)
      pass(3.seconds)
      joinAndTunnel()
      actions.expectMessage(("recovered", 4, 3.seconds.toNanos))
      actions.expectNoMessage(50.millis)

    "owe an action on the fleet's side a recovery timed from its end, or none if still Reporting then" in new Fixture(withTunnels = true):
      joinAndTunnel()
      device ! Device.Affect(0, 8, Selection.All, cause = 1, Device.Affect.Phase.Start)
      actions.expectMessage(("cut", 1, 0L))
      pass(20.seconds)
      device ! Device.Affect(0, 8, Selection.All, cause = 1, Device.Affect.Phase.End)
      actions.expectMessage(("recovered", 1, 0L)) // its link was down, and it never noticed
      device ! Device.Affect(0, 8, Selection.All, cause = 2, Device.Affect.Phase.Start)
      actions.expectMessage(("cut", 2, 0L))
      pass(5.seconds)
      for i <- 1 to 3 do
        if i > 1 then pass(10.seconds)
        tunnelCalls.expectMessageType[Call].answer(Reply.Failed(FailureReason.TimedOut))
      expectMove(Reporting, Tunneling)
      device ! Device.Affect(0, 8, Selection.All, cause = 2, Device.Affect.Phase.End)
      actions.expectNoMessage(50.millis)
      pass(1.second) // past its pause
      opens.expectMessageType[Promise[Either[SessionFailure, Session]]].success(Right(ScriptedTunnel(tunnelCalls.ref)))
      expectMove(Tunneling, Reporting)
      actions.expectMessage(("recovered", 2, 1.second.toNanos))

    "count a config push it applies before hearing the push's moment as applied then, not owed for ever" in new Fixture:
      joinAndDownload()
      device ! Device.Affect(0, 8, Selection.All, cause = 4, Device.Affect.Phase.Start, applies = true)
      actions.expectMessage(("cut", 4, 0L))
      // The moment still on its way (on another thread, or behind in the mailbox) when the push's news comes.
      heartbeatDue().ok(HeartbeatReply(2))
      expectMove(Reporting, ConfigDownloading)
      nextCall(ApiCall.Config).ok(ConfigHeader(2))
      expectMove(ConfigDownloading, Reporting)
      actions.expectMessage(("recovered", 4, 0L))
      device ! Device.Affect(0, 8, Selection.All, cause = 4, Device.Affect.Phase.Moment, applies = true)
      actions.expectNoMessage(50.millis) // counted once

    "keep trying to open a tunnel, backing off, while the server is unreachable" in new Fixture(withTunnels = true):
      nextCall(ApiCall.Join).ok(JoinReply(10, 1000, configSeq = 0))
      expectMove(Discovering, Tunneling)
      opens.expectMessageType[Promise[Either[SessionFailure, Session]]].success(Left(SessionFailure.Failed(FailureReason.ConnectFailed)))
      val (first, second) = timeUntil(opens)
      assert(first >= 500.millis && first <= 600.millis) // half of 1 s
      second.success(Left(SessionFailure.Failed(FailureReason.TimedOut)))
      val (next, _) = timeUntil(opens)
      assert(next >= 1.second && next <= 1100.millis) // half of 2 s: it backs off
      moves.expectNoMessage(50.millis) // still Tunneling

    "join again, after a pause, when the SSH server no longer admits it" in new Fixture(withTunnels = true):
      nextCall(ApiCall.Join).ok(JoinReply(10, 1000, configSeq = 0))
      expectMove(Discovering, Tunneling)
      opens.expectMessageType[Promise[Either[SessionFailure, Session]]].success(Left(SessionFailure.Refused(FailureReason.AuthRejected)))
      expectMove(Tunneling, Backoff)
      pass(500.millis)
      expectMove(Backoff, Discovering)
      nextCall(ApiCall.Join)

    "stop sending when quiesced, and still take the replies in flight" in new Fixture:
      joinAndDownload()
      val beat = heartbeatDue()
      val quiesced = TestProbe[Done]()
      device ! Device.Quiesce(quiesced.ref)
      quiesced.expectMessage(Done)
      beat.ok(HeartbeatReply(7)) // would start a download, were it not quiesced
      pass(60.seconds)
      calls.expectNoMessage(50.millis)
      moves.expectNoMessage(50.millis)

    "ignore replies that belong to a session before a rejoin" in new Fixture:
      joinAndDownload()
      val stale = heartbeatDue()
      pass(10.seconds)
      nextCall(ApiCall.Heartbeat).answer(Forbidden)
      expectMove(Reporting, Discovering)
      stale.ok(HeartbeatReply(5)) // from the old session: must not start a download
      moves.expectNoMessage(50.millis)
      nextCall(ApiCall.Join)
  }

  /** An agent as a shell script is one: it sleeps before it registers, polls at once, tries again, and exits. */
  private lazy val agent = profileFile("agent", """
    name = agent
    start-delay = 2s
    join {
      name = register
      path = "/register"
      form { mac = "{{mac}}" }
      form-encoding { trailing-separator = true }
      expect = [201]
      reactions { 403 = stop }
      retry { tries = 3, delay = 1s }
      keep { id { regex = "id: (\\S+)", type = text } }
    }
    messages {
      poll {
        interval = 30s
        first = at-join
        path = "/devices/{{id}}/checksum"
        reactions { 404 = "stop after 3" }
        keep { checksum { regex = "(\\S+)", type = text, default = "" } }
      }
    }
    """)

  /** An agent that checks the archive it downloads against the checksum it polled, and that a device
    * its identity row names resumes as, with the id and key the row gives it.
    */
  private lazy val checking =
    val rows = (0 until 100).map(i => if i == 7 then "ap7,k7" else ",").mkString("id,key\n", "\n", "\n")
    val csv = java.nio.file.Files.createTempFile("known", ".csv")
    csv.toFile.deleteOnExit()
    java.nio.file.Files.writeString(csv, rows)
    profileFile("checking", s"""
    name = checking
    identity.csv = "$csv"
    join {
      path = "/register"
      keep { id { regex = "id: (\\\\S+)", type = text }, key { regex = "key: (\\\\S+)", type = text } }
    }
    resume {
      name = hello
      path = "/devices/{{id}}/info"
      headers { X-Key = "{{key}}" }
      expect = [204, 409] # 409: known already, as some controllers answer
    }
    messages {
      poll {
        interval = 30s
        path = "/devices/{{id}}/checksum"
        keep { checksum { regex = "(\\\\S+)", type = text, default = "" } }
      }
    }
    triggers {
      update {
        when { differs = checksum, from = applied }
        calls = [
          {
            path = "/devices/{{id}}/archive"
            keep { archiveMd5 { digest = md5 } }
            check = "archiveMd5 == checksum"
            retry { tries = 2, delay = 1s }
          }
          { name = done, path = "/devices/{{id}}/applied" }
        ]
      }
    }
    """)

  /** The agent, with a poll tried again after longer than its interval. */
  private lazy val patient = profileFile("patient", scala.io.Source.fromFile(agent).mkString
    .replace("reactions { 404 = \"stop after 3\" }", "retry { tries = 3, delay = 40s }"))

  private def profileFile(name: String, text: String): String =
    val file = java.nio.file.Files.createTempFile(name, ".conf")
    file.toFile.deleteOnExit()
    java.nio.file.Files.writeString(file, text)
    file.toString

  private def text(status: Int, body: String) = Reply.Response(status, body.getBytes(UTF_8))

  "A device playing an agent" should {
    "wait its start delay, register by its own name with the form as written, and poll at once" in new Fixture(profile = agent):
      quietFor(1900.millis, calls)
      pass(100.millis)
      val register = next("register")
      assert(String(register.request.body, UTF_8) == "mac=02%3A00%3A00%3A00%3A00%3A07&")
      register.answer(text(201, "id: ap7\n"))
      expectMove(Discovering, Reporting)
      assert(next("poll").request.path == "/devices/ap7/checksum") // no time passed: first = at-join

    "try a register the controller answers unexpectedly again within its cycle, then back off" in new Fixture(profile = agent):
      pass(2.seconds)
      next("register").answer(text(200, "id: ap7\n")) // 200 is not the 201 it expects
      val (first, again) = timeUntil(calls)
      assert(first >= 900.millis && again.request.kind.key == "register")
      again.answer(Reply.Failed(FailureReason.TimedOut))
      val (second, last) = timeUntil(calls)
      assert(second >= 900.millis && last.request.kind.key == "register")
      last.answer(text(200, "id: ap7\n"))
      expectMove(Discovering, Backoff) // three tries, all failed: the cycle failed

    "stop itself on 403 at register, and start again, as after a reboot, when restarted" in new Fixture(profile = agent):
      pass(2.seconds)
      next("register").answer(Forbidden)
      expectMove(Discovering, Stopped)
      halts.expectMessage("register: 403")
      quietFor(60.seconds, calls)
      device ! Device.Restart
      expectMove(Stopped, Discovering)
      quietFor(1900.millis, calls) // its start delay again
      pass(100.millis)
      next("register")

    "end a poll's tries when its next round starts: one round in flight, as an agent's loop" in new Fixture(profile = patient):
      pass(2.seconds)
      next("register").answer(text(201, "id: ap7\n"))
      expectMove(Discovering, Reporting)
      next("poll").answer(Reply.Failed(FailureReason.TimedOut)) // its next try is due in 40 s, after the next round
      pass(30.seconds)
      next("poll").answer(text(200, "abc\n")) // the next round, which succeeds
      quietFor(29.seconds, calls) // the first round's try, due at 40 s, is dropped
      pass(1.second)
      next("poll")

    "stop itself after three 404s on its poll, counting only since its last success" in new Fixture(profile = agent):
      pass(2.seconds)
      next("register").answer(text(201, "id: ap7\n"))
      expectMove(Discovering, Reporting)
      val NotFound = text(404, "")
      next("poll").answer(NotFound)
      pass(30.seconds)
      next("poll").answer(NotFound)
      pass(30.seconds)
      next("poll").answer(text(200, "abc\n")) // found again: the count starts afresh
      for _ <- 1 to 2 do
        pass(30.seconds)
        next("poll").answer(NotFound)
      halts.expectNoMessage(50.millis)
      pass(30.seconds)
      next("poll").answer(NotFound)
      expectMove(Reporting, Stopped)
      halts.expectMessage("poll: 404 x3")
      quietFor(90.seconds, calls)
      // Restarted, it counts afresh: one more 404 does not stop it.
      device ! Device.Restart
      expectMove(Stopped, Discovering)
      pass(2.seconds)
      next("register").answer(text(201, "id: ap7\n"))
      expectMove(Discovering, Reporting)
      next("poll").answer(NotFound)
      pass(30.seconds)
      next("poll")
      halts.expectNoMessage(50.millis)
    "resume as its identity row makes it known, and register afresh once refused" in new Fixture(profile = checking):
      val hello = next("hello")
      assert(hello.request.path == "/devices/ap7/info" && String(hello.request.headers, UTF_8).contains("X-Key: k7"))
      hello.answer(Forbidden) // the controller forgot it: it forgets what its row gave it, and registers
      expectMove(Discovering, Backoff)
      val (_, register) = timeUntil(calls, max = 2.seconds)
      assert(register.request.kind.key == "join")

    "count an expected status other than 2xx ok, and a 2xx it does not expect failed" in new Fixture(profile = checking):
      next("hello").answer(text(200, ""))
      judgements.expectMessage(200 -> Some(FailureReason.UnexpectedStatus))
      expectMove(Discovering, Backoff)

    "apply an archive only when its digest matches the checksum it polled, trying again within the cycle" in new Fixture(profile = checking):
      next("hello").answer(text(409, ""))
      judgements.expectMessage(409 -> None) // expected: counted ok
      expectMove(Discovering, Reporting)
      val archive = "config 2\n".getBytes(UTF_8)
      val md5 = java.util.HexFormat.of.formatHex(java.security.MessageDigest.getInstance("MD5").digest(archive))
      pass(15.seconds)
      next("poll").answer(text(200, md5))
      expectMove(Reporting, ConfigDownloading)
      next("update").answer(Reply.Response(200, "config 1\n".getBytes(UTF_8))) // stale: not what was announced
      judgements.expectMessage(200 -> Some(FailureReason.CheckFailed))
      val (_, again) = timeUntil(calls)
      assert(again.request.kind.key == "update")
      again.answer(Reply.Response(200, "trunc".getBytes(UTF_8)))
      judgements.expectMessage(200 -> Some(FailureReason.CheckFailed))
      expectMove(ConfigDownloading, Reporting) // both tries failed: not applied, and not sent done
      pass(30.seconds)
      next("poll").answer(text(200, md5)) // still announced: it tries again, and this time the archive is whole
      expectMove(Reporting, ConfigDownloading)
      next("update").answer(Reply.Response(200, archive))
      next("done").answer(text(200, ""))
      expectMove(ConfigDownloading, Reporting)
      judgements.expectNoMessage(50.millis)
  }
