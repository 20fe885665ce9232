package fleetsim.device

import com.github.plokhotnyuk.jsoniter_scala.core.writeToArray
import fleetsim.protocol.*
import fleetsim.transport.{FailureReason, Reply, Request, Transport, Tunnel, Tunnels}
import org.apache.pekko.actor.typed.scaladsl.{ActorContext, Behaviors}
import org.apache.pekko.Done
import org.apache.pekko.actor.typed.{ActorRef, Behavior, PostStop, PreRestart}

import java.util.random.RandomGenerator
import scala.concurrent.duration.*
import scala.util.{Failure, Success}

/** One simulated access point: joins the controller, opens its own tunnel when the fleet uses one,
  * reports on jittered timers, downloads new configuration, and recovers by itself from refusals,
  * lost tunnels and lost heartbeats. It owns its lifecycle and its tunnel; a restart loses the
  * session and the device simply joins again.
  */
object Device:
  sealed trait Command
  /** Stop sending: no new calls, so the ones in flight can be answered before the fleet stops. */
  final case class Quiesce(replyTo: ActorRef[Done]) extends Command

  private case object RetryJoin extends Command
  private case object RetryTunnel extends Command
  private final case class TunnelOpened(result: Either[FailureReason, Tunnel]) extends Command
  private final case class TunnelLost(tunnel: Int) extends Command
  private case object HeartbeatDue extends Command
  private case object StatsDue extends Command
  // Replies carry the session they belong to, so replies from before a rejoin are ignored.
  private final case class JoinReplied(reply: Reply) extends Command
  private final case class HeartbeatReplied(session: Int, reply: Reply) extends Command
  private final case class StatsReplied(session: Int, reply: Reply) extends Command
  private final case class ConfigReplied(session: Int, reply: Reply) extends Command

  /** @param http carries the join, and every call when there are no tunnels
    * @param tunnels opens the device's own tunnel after each join; None = plain HTTP, no Tunneling
    * @param wheel wakes the device for its periodic sends and retries
    * @param clock nanoseconds on the wheel's clock (System.nanoTime; a test's manual time)
    */
  def apply(
      identity: Identity,
      settings: DeviceSettings,
      http: Transport,
      tunnels: Option[Tunnels],
      events: DeviceEvents,
      wheel: TimingWheel,
      random: RandomGenerator,
      clock: () => Long = () => System.nanoTime()): Behavior[Command] =
    Behaviors.setup { context =>
      new Device(identity, settings, http, tunnels, events, wheel, random, clock, context).discovering(failures = 0, configSeq = 0)
    }

  /** What a device knows between a join (or a new tunnel) and the next: the join reply, what its
    * calls travel through, the latest config it applied and the latest one the controller announced.
    */
  private final case class Session(
      number: Int,
      join: JoinReply,
      channel: Transport,
      configSeq: Long,
      announcedSeq: Long,
      heartbeatDueAt: Long,
      statsDueAt: Long,
      heartbeatSeq: Long = 0,
      lostHeartbeats: Int = 0)

private final class Device(
    identity: Identity,
    settings: DeviceSettings,
    http: Transport,
    tunnels: Option[Tunnels],
    events: DeviceEvents,
    wheel: TimingWheel,
    random: RandomGenerator,
    clock: () => Long,
    context: ActorContext[Device.Command]):
  import Device.*
  import DeviceState.*

  private val startedAt = clock()
  private var state: Option[DeviceState] = None
  private var sessions = 0
  /** The open tunnel and its number, which tells its loss from an older one's. */
  private var tunnel: Option[Tunnel] = None
  private var tunnelNumber = 0

  // ---- states ----

  private def discovering(failures: Int, configSeq: Long): Behavior[Command] =
    // Rendered per join, not kept: joins are rare, and a million devices would keep 150 MB of them.
    val request = JoinRequest(identity.mac, identity.serial, identity.model, identity.firmware, tunnels.flatMap(_.publicKey))
    send(http, Request(MessageKind.Join, Protocol.joinPath, Some(writeToArray(request))))(JoinReplied(_))
    in(Discovering) {
      case JoinReplied(Reply.Ok(body)) =>
        Protocol.parse[JoinReply](body) match
          case Some(join) if tunnels.isDefined => tunneling(join, configSeq, failures = 0)
          case Some(join) => startSession(join, configSeq, http)
          case None => backingOff(failures, configSeq)
      case JoinReplied(Reply.Forbidden) =>
        // Not admitted: stay Discovering and ask again later, more slowly each time.
        wake(RetryJoin, settings.backoff.delay(failures, random.nextDouble()))
        Behaviors.same
      case JoinReplied(Reply.Failed(_)) => backingOff(failures, configSeq)
      case RetryJoin => discovering(failures + 1, configSeq)
      case Quiesce(replyTo) => quiesced(replyTo)
      case _: HeartbeatReplied | _: StatsReplied | _: ConfigReplied | _: TunnelLost => Behaviors.same // from an old session
      case HeartbeatDue | StatsDue | RetryTunnel => Behaviors.same // wake-ups of an old session
      case _: TunnelOpened => Behaviors.unhandled
    }

  private def backingOff(failures: Int, configSeq: Long): Behavior[Command] =
    closeTunnel()
    wake(RetryJoin, settings.backoff.delay(failures, random.nextDouble()))
    in(Backoff) {
      case RetryJoin => discovering(failures + 1, configSeq)
      case Quiesce(replyTo) => quiesced(replyTo)
      case _: HeartbeatReplied | _: StatsReplied | _: ConfigReplied | _: TunnelLost => Behaviors.same // from an old session
      case HeartbeatDue | StatsDue | RetryTunnel => Behaviors.same // wake-ups of an old session
      case _: JoinReplied | _: TunnelOpened => Behaviors.unhandled
    }

  /** Opens the device's own tunnel now; on failure waits a backoff delay and tries again. */
  private def tunneling(join: JoinReply, configSeq: Long, failures: Int): Behavior[Command] =
    context.pipeToSelf(tunnels.get.open(identity, join.ssh)) {
      case Success(result) => TunnelOpened(result)
      case Failure(_) => TunnelOpened(Left(FailureReason.ProtocolError))
    }
    awaitingTunnel(join, configSeq, failures)

  private def awaitingTunnel(join: JoinReply, configSeq: Long, failures: Int): Behavior[Command] =
    in(Tunneling) {
      case TunnelOpened(Right(opened)) =>
        tunnelNumber += 1
        tunnel = Some(opened)
        val number = tunnelNumber
        context.pipeToSelf(opened.lost)(_ => TunnelLost(number))
        startSession(join, configSeq, opened)
      case TunnelOpened(Left(FailureReason.AuthRejected)) =>
        backingOff(failures, configSeq = 0) // the server no longer admits this device: join again, later
      case TunnelOpened(Left(_)) =>
        wake(RetryTunnel, settings.backoff.delay(failures, random.nextDouble()))
        Behaviors.same
      case RetryTunnel => tunneling(join, configSeq, failures + 1)
      case Quiesce(replyTo) => quiesced(replyTo)
      case _: HeartbeatReplied | _: StatsReplied | _: ConfigReplied | _: TunnelLost => Behaviors.same // from an old session
      case HeartbeatDue | StatsDue => Behaviors.same // wake-ups of an old session
      case RetryJoin | _: JoinReplied => Behaviors.unhandled
    }

  /** The tunnel is gone or dead: after a jittered pause, so that a herd does not return as one. */
  private def retunneling(s: Session): Behavior[Command] =
    closeTunnel()
    wake(RetryTunnel, settings.backoff.delay(0, random.nextDouble()))
    awaitingTunnel(s.join, s.configSeq, failures = 0)

  private def reporting(s: Session): Behavior[Command] =
    in(Reporting)(online(s, reporting) orElse {
      case ConfigReplied(_, _) => Behaviors.same // a download that lost a race with a rejoin
    })

  private def configDownloading(s: Session): Behavior[Command] =
    in(ConfigDownloading)(online(s, configDownloading) orElse {
      case ConfigReplied(n, _) if n != s.number => Behaviors.same
      case ConfigReplied(_, Reply.Ok(body)) =>
        Protocol.parse[ConfigHeader](body) match
          case Some(config) => reporting(s.copy(configSeq = config.configSeq))
          case None => reporting(s) // the next heartbeat reply announces it again
      case ConfigReplied(_, Reply.Forbidden) => refused()
      case ConfigReplied(_, Reply.Failed(_)) => reporting(s)
    })

  /** What Reporting and ConfigDownloading share: the periodic jobs and their replies. */
  private def online(s: Session, stay: Session => Behavior[Command]): PartialFunction[Command, Behavior[Command]] =
    case HeartbeatDue if early(s.heartbeatDueAt) => Behaviors.same // a wake-up of an old session
    case StatsDue if early(s.statsDueAt) => Behaviors.same
    case HeartbeatDue =>
      val next = scheduleNext(HeartbeatDue, MessageKind.Heartbeat, s.heartbeatDueAt, s.join.heartbeatInterval)
      val seq = s.heartbeatSeq + 1
      val beat = Heartbeat(seq, uptimeS, state.fold("")(_.toString), s.configSeq)
      send(s.channel, Request(MessageKind.Heartbeat, Protocol.heartbeatPath(identity.mac), Some(writeToArray(beat))))(HeartbeatReplied(s.number, _))
      stay(s.copy(heartbeatSeq = seq, heartbeatDueAt = next))
    case StatsDue =>
      val next = scheduleNext(StatsDue, MessageKind.Stats, s.statsDueAt, s.join.statsInterval)
      StatsKind.values.foreach { kind =>
        send(s.channel, Request(MessageKind.Stats, Protocol.statsPath(identity.mac, kind), Some(statsBody(kind))))(StatsReplied(s.number, _))
      }
      stay(s.copy(statsDueAt = next))
    case HeartbeatReplied(n, _) if n != s.number => Behaviors.same
    case HeartbeatReplied(_, Reply.Ok(body)) =>
      val announced = Protocol.parse[HeartbeatReply](body).fold(s.announcedSeq)(_.configSeq)
      val next = s.copy(lostHeartbeats = 0, announcedSeq = announced.max(s.announcedSeq))
      if state.contains(Reporting) && next.announcedSeq > next.configSeq then startDownload(next) else stay(next)
    case HeartbeatReplied(_, Reply.Forbidden) => refused()
    case HeartbeatReplied(_, Reply.Failed(_)) =>
      val lost = s.lostHeartbeats + 1
      if lost < settings.maxLostHeartbeats then stay(s.copy(lostHeartbeats = lost))
      else if tunnel.isDefined then retunneling(s)
      else backingOff(failures = 0, s.configSeq)
    case StatsReplied(n, Reply.Forbidden) if n == s.number => refused()
    case StatsReplied(_, _) => Behaviors.same // counted by the transport's metrics; nothing to decide
    case TunnelLost(n) if n == tunnelNumber => retunneling(s)
    case TunnelLost(_) => Behaviors.same // an older tunnel's
    case Quiesce(replyTo) => quiesced(replyTo)
    case RetryTunnel => Behaviors.same // an old session's
    case RetryJoin | _: JoinReplied | _: TunnelOpened => Behaviors.unhandled

  /** The run is ending: send nothing more, let the calls in flight come home, keep the state. */
  private def quiesced(replyTo: ActorRef[Done]): Behavior[Command] =
    replyTo ! Done
    in(state.get) {
      case TunnelOpened(Right(late)) =>
        late.close()
        Behaviors.same
      case Quiesce(again) =>
        again ! Done
        Behaviors.same
      case _ => Behaviors.same
    }

  // ---- transitions ----

  private def startSession(join: JoinReply, configSeq: Long, channel: Transport): Behavior[Command] =
    sessions += 1
    // Random phase: a fleet that joined together must not report together.
    val s = Session(sessions, join, channel, configSeq, join.configSeq,
      heartbeatDueAt = schedule(HeartbeatDue, (join.heartbeatInterval.toNanos * random.nextDouble()).toLong.nanos),
      statsDueAt = schedule(StatsDue, (join.statsInterval.toNanos * random.nextDouble()).toLong.nanos))
    if s.announcedSeq > s.configSeq then startDownload(s) else reporting(s)

  /** Wakes the device after `delay`; returns when it is meant to (on the clock). */
  private def schedule(tick: Command, delay: FiniteDuration): Long =
    wake(tick, delay)
    clock() + delay.toNanos

  private def wake(tick: Command, delay: FiniteDuration): Unit = wheel.wake(delay, context.self, tick)

  /** Not due yet, so the wake-up was meant for a session before this one (the wheel is never early). */
  private def early(dueAt: Long): Boolean = dueAt - (clock() + wheel.tick.toNanos) > 0

  /** Records how late this send left against its intended time, and schedules the next one an
    * interval after the intended time, not the actual one: an overloaded simulator then shows as
    * lateness instead of quietly sending less (coordinated omission). More than an interval behind,
    * it starts afresh from now rather than firing a burst to catch up.
    */
  private def scheduleNext(tick: Command, kind: MessageKind, dueAt: Long, interval: FiniteDuration): Long =
    val now = clock()
    events.late(kind, now - dueAt)
    val next = dueAt + settings.jittered(interval, random.nextDouble()).toNanos
    val from = if next < now - interval.toNanos then now else next
    wake(tick, (from - now).max(0).nanos)
    from

  private def startDownload(s: Session): Behavior[Command] =
    send(s.channel, Request(MessageKind.Config, Protocol.configPath(identity.mac), None))(ConfigReplied(s.number, _))
    configDownloading(s)

  /** 403 from any call: forget the session and config, and join again. */
  private def refused(): Behavior[Command] =
    closeTunnel()
    discovering(failures = 0, configSeq = 0)

  private def closeTunnel(): Unit =
    tunnel.foreach(_.close())
    tunnel = None

  // ---- plumbing ----

  /** The behaviour of one state; entering it is reported once, and so is stopping in it. */
  private def in(next: DeviceState)(handle: Command => Behavior[Command]): Behavior[Command] =
    if !state.contains(next) then
      events.moved(state, next)
      state = Some(next)
    Behaviors
      .receiveMessage[Command](handle)
      .receiveSignal { case (_, PostStop | PreRestart) =>
        closeTunnel()
        events.stopped(next)
        Behaviors.same
      }

  /** Every async result comes back as a message, success or failure. */
  private def send(through: Transport, request: Request)(reply: Reply => Command): Unit =
    context.pipeToSelf(through.send(request)) {
      case Success(r) => reply(r)
      case Failure(_) => reply(Reply.Failed(FailureReason.ProtocolError))
    }

  private def uptimeS: Long = (clock() - startedAt) / 1_000_000_000L

  private def statsBody(kind: StatsKind): Array[Byte] =
    val figures = kind match
      case StatsKind.System => s""""cpuPct":${random.nextInt(100)},"memFreeKb":${random.nextInt(1 << 20)}"""
      case StatsKind.Radio => s""""channel":${1 + random.nextInt(11)},"noiseDbm":${-95 + random.nextInt(10)}"""
      case StatsKind.Clients => s""""clients":${random.nextInt(64)}"""
    s"""{"mac":"${identity.mac}","uptimeS":$uptimeS,$figures}""".getBytes(java.nio.charset.StandardCharsets.UTF_8)
