package fleetsim.device

import com.github.plokhotnyuk.jsoniter_scala.core.writeToArray
import fleetsim.protocol.*
import fleetsim.transport.{FailureReason, Reply, Request, Transport, Tunnel, Tunnels}
import org.apache.pekko.Done
import org.apache.pekko.actor.typed.ActorRef
import org.apache.pekko.actor.{Actor, Deploy, Props}
import org.slf4j.LoggerFactory

import java.util.random.RandomGenerator
import scala.concurrent.{ExecutionContext, Future}
import scala.concurrent.duration.*
import scala.util.control.NonFatal

/** One simulated access point: joins the controller, opens its own tunnel when the fleet uses one,
  * reports on jittered schedules, downloads new configuration, and recovers by itself from
  * refusals, lost tunnels, lost heartbeats and its own failures. It owns its lifecycle and its
  * tunnel; a failure loses the session, and the device backs off and joins again.
  *
  * A million of these share one process, so a device is one object of plain fields and a state
  * (docs/adr/0004): a classic actor, which costs 260 bytes less than a typed one; no behaviour,
  * closure or session copy per transition, no supervisor of its own, and who it is derived from its
  * number when needed instead of kept. It speaks the typed [[Command]]s all the same.
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

  /** What every device of a fleet shares; each device keeps one reference to it.
    *
    * @param identity who device i is
    * @param http carries the join, and every call when there are no tunnels
    * @param tunnels opens the device's own tunnel after each join; None = plain HTTP, no Tunneling
    * @param wheel wakes the devices for their periodic sends and retries
    * @param clock nanoseconds on the wheel's clock (System.nanoTime; a test's manual time)
    */
  final case class Shared(
      identity: Int => Identity,
      settings: DeviceSettings,
      http: Transport,
      tunnels: Option[Tunnels],
      events: DeviceEvents,
      wheel: TimingWheel,
      random: RandomGenerator,
      clock: () => Long = () => System.nanoTime())

  /** Device number `i` of the fleet; `context.actorOf` it, and `toTyped[Command]` its ref. */
  def props(i: Int, shared: Shared): Props = Props(new Device(i, shared)).copy(deploy = deploy)

  /** In its own mailbox; one deployment for all devices, where `withMailbox` would make one each. */
  private val deploy = Deploy(mailbox = DeviceMailbox.id)

  private val log = LoggerFactory.getLogger(classOf[Device])

private final class Device(number: Int, shared: Device.Shared) extends Actor:
  import Device.*
  import DeviceState.*
  import shared.{events, random, settings, wheel}

  private val startedAt = shared.clock()
  private var state = Discovering
  private var quiesced = false
  /** Joins or tunnel openings failed in a row: the backoff grows with them. */
  private var failures = 0
  /** Sessions started: a session is a join (and tunnel) and what the device does until the next. */
  private var session = 0
  // What the last join said (seconds, not durations: two objects fewer per device).
  private var heartbeatS = 0
  private var statsS = 0
  private var ssh: Option[SshEndpoint] = None
  // The session's: the config applied and announced, the schedules.
  private var configSeq = 0L
  private var announcedSeq = 0L
  private var heartbeatDueAt = 0L
  private var statsDueAt = 0L
  private var heartbeatSeq = 0
  private var lostHeartbeats = 0
  /** The open tunnel and its number, which tells its loss from an older one's. */
  private var tunnel: Option[Tunnel] = None
  private var tunnelNumber = 0

  events.moved(None, Discovering)
  join()

  def receive: Receive = { case command: Command => handle(command) }

  private def handle(command: Command): Unit =
    try
      if quiesced then whileQuiesced(command)
      else
        command match
          case Quiesce(replyTo) =>
            quiesced = true
            replyTo ! Done
          case _ =>
            state match
              case Discovering => discovering(command)
              case Backoff => backingOff(command)
              case Tunneling => tunneling(command)
              case Reporting | ConfigDownloading => online(command)
    catch case NonFatal(e) => failed(e)

  override def postStop(): Unit =
    closeTunnel()
    events.stopped(state)

  // ---- states: what each does with a message; anything else is from an older session ----

  private def discovering(command: Command): Unit = command match
    case JoinReplied(Reply.Ok(body)) =>
      Protocol.parse[JoinReply](body) match
        case Some(join) => joined(join)
        case None => backOff()
    case JoinReplied(Reply.Forbidden) => wake(RetryJoin, backoffDelay()) // not admitted: ask again, more slowly each time
    case JoinReplied(Reply.Failed(_)) => backOff()
    case RetryJoin => joinAgain()
    case _ => ()

  private def backingOff(command: Command): Unit = command match
    case RetryJoin => joinAgain()
    case _ => ()

  private def tunneling(command: Command): Unit = command match
    case TunnelOpened(Right(opened)) =>
      tunnelNumber += 1
      tunnel = Some(opened)
      val lost = TunnelLost(tunnelNumber)
      pipe(opened.lost, Done)(_ => lost)
      startSession()
    case TunnelOpened(Left(FailureReason.AuthRejected)) =>
      configSeq = 0 // the server no longer admits this device: join again, later
      backOff()
    case TunnelOpened(Left(_)) => wake(RetryTunnel, backoffDelay())
    case RetryTunnel =>
      failures += 1
      openTunnel()
    case _ => ()

  /** Reporting and ConfigDownloading: the periodic sends and their replies. */
  private def online(command: Command): Unit = command match
    case HeartbeatDue if !early(heartbeatDueAt) => heartbeat()
    case StatsDue if !early(statsDueAt) => statsRound()
    case HeartbeatReplied(n, reply) if n == session =>
      reply match
        case Reply.Ok(body) =>
          lostHeartbeats = 0
          Protocol.parse[HeartbeatReply](body).foreach(r => announcedSeq = announcedSeq.max(r.configSeq))
          if state == Reporting && announcedSeq > configSeq then download()
        case Reply.Forbidden => refused()
        case Reply.Failed(_) =>
          lostHeartbeats += 1
          if lostHeartbeats >= settings.maxLostHeartbeats then
            if tunnel.isDefined then retunnel()
            else
              failures = 0
              backOff()
    case StatsReplied(n, Reply.Forbidden) if n == session => refused()
    case ConfigReplied(n, reply) if n == session && state == ConfigDownloading =>
      reply match
        case Reply.Ok(body) =>
          // Unreadable, it stays unapplied: the next heartbeat reply announces it again.
          Protocol.parse[ConfigHeader](body).foreach(config => configSeq = config.configSeq)
          enter(Reporting)
        case Reply.Forbidden => refused()
        case Reply.Failed(_) => enter(Reporting)
    case TunnelLost(n) if n == tunnelNumber => retunnel()
    case _ => () // stats replies are counted by the transport's metrics; the rest are an older session's

  /** The run is ending: send nothing more, let the calls in flight come home, keep the state. */
  private def whileQuiesced(command: Command): Unit = command match
    case TunnelOpened(Right(late)) => late.close()
    case Quiesce(again) => again ! Done
    case _ => ()

  // ---- transitions ----

  private def join(): Unit =
    enter(Discovering)
    val id = shared.identity(number)
    // Rendered per join, not kept: joins are rare, and a million devices would keep 150 MB of them.
    val request = JoinRequest(id.mac, id.serial, id.model, id.firmware, shared.tunnels.flatMap(_.publicKey))
    send(shared.http, Request(MessageKind.Join, Protocol.joinPath, Some(writeToArray(request))))(JoinReplied(_))

  /** A backoff's wake-up: one more failure in a row, one more join. */
  private def joinAgain(): Unit =
    failures += 1
    join()

  private def joined(join: JoinReply): Unit =
    failures = 0
    heartbeatS = join.heartbeatIntervalS.max(1) // a controller's 0 must not make its devices spin
    statsS = join.statsIntervalS.max(1)
    announcedSeq = join.configSeq
    if shared.tunnels.isDefined then
      ssh = join.ssh // kept only by devices that tunnel: 100 bytes a device
      openTunnel()
    else startSession()

  /** Opens the device's own tunnel now; on failure waits a backoff delay and tries again. */
  private def openTunnel(): Unit =
    enter(Tunneling)
    pipe(shared.tunnels.get.open(shared.identity(number), ssh), Left(FailureReason.ProtocolError))(TunnelOpened(_))

  /** The tunnel is gone or dead: after a jittered pause, so that a herd does not return as one. */
  private def retunnel(): Unit =
    closeTunnel()
    failures = 0
    wake(RetryTunnel, backoffDelay())
    enter(Tunneling)

  private def startSession(): Unit =
    session += 1
    heartbeatSeq = 0
    lostHeartbeats = 0
    // Random phase: a fleet that joined together must not report together.
    heartbeatDueAt = schedule(HeartbeatDue, (heartbeatS * 1e9 * random.nextDouble()).toLong.nanos)
    statsDueAt = schedule(StatsDue, (statsS * 1e9 * random.nextDouble()).toLong.nanos)
    if announcedSeq > configSeq then download() else enter(Reporting)

  private def heartbeat(): Unit =
    heartbeatDueAt = scheduleNext(HeartbeatDue, MessageKind.Heartbeat, heartbeatDueAt, heartbeatS.seconds)
    heartbeatSeq += 1
    val beat = Heartbeat(heartbeatSeq, uptimeS, state.toString, configSeq)
    val n = session
    send(channel, Request(MessageKind.Heartbeat, Protocol.heartbeatPath(mac), Some(writeToArray(beat))))(HeartbeatReplied(n, _))

  private def statsRound(): Unit =
    statsDueAt = scheduleNext(StatsDue, MessageKind.Stats, statsDueAt, statsS.seconds)
    val (n, address) = (session, mac)
    StatsKind.values.foreach { kind =>
      send(channel, Request(MessageKind.Stats, Protocol.statsPath(address, kind), Some(statsBody(address, kind))))(StatsReplied(n, _))
    }

  private def download(): Unit =
    enter(ConfigDownloading)
    val n = session
    send(channel, Request(MessageKind.Config, Protocol.configPath(mac), None))(ConfigReplied(n, _))

  /** 403 from any call: forget the session and config, and join again. */
  private def refused(): Unit =
    closeTunnel()
    failures = 0
    configSeq = 0
    join()

  /** Waits a backoff delay, then joins again. */
  private def backOff(): Unit =
    closeTunnel()
    wake(RetryJoin, backoffDelay())
    enter(Backoff)

  /** An exception inside the device: what a restart would do, without a supervisor per device. */
  private def failed(e: Throwable): Unit =
    log.warn("device {} failed in {}, joining again after a pause: {}", mac, state, e.toString)
    configSeq = 0
    backOff()

  // ---- plumbing ----

  /** Enters a state; entering is reported once, however often a state is re-entered. Wake-ups are
    * set before, so a test that steps time once it sees the move cannot step past them.
    */
  private def enter(next: DeviceState): Unit =
    if state != next then
      events.moved(Some(state), next)
      state = next

  private def backoffDelay(): FiniteDuration = settings.backoff.delay(failures, random.nextDouble())

  /** What the session's calls travel through. */
  private def channel: Transport = tunnel.getOrElse(shared.http)

  private def closeTunnel(): Unit =
    tunnel.foreach(_.close())
    tunnel = None

  /** Wakes the device after `delay`; returns when it is meant to (on the clock). */
  private def schedule(tick: Command, delay: FiniteDuration): Long =
    wake(tick, delay)
    shared.clock() + delay.toNanos

  private def wake(tick: Command, delay: FiniteDuration): Unit = wheel.wake(delay, self, tick)

  /** Not due yet, so the wake-up was meant for a session before this one (the wheel is never early). */
  private def early(dueAt: Long): Boolean = dueAt - (shared.clock() + wheel.tick.toNanos) > 0

  /** Records how late this send left against its intended time, and schedules the next one an
    * interval after the intended time, not the actual one: an overloaded simulator then shows as
    * lateness instead of quietly sending less (coordinated omission). More than an interval behind,
    * it starts afresh from now rather than firing a burst to catch up.
    */
  private def scheduleNext(tick: Command, kind: MessageKind, dueAt: Long, interval: FiniteDuration): Long =
    val now = shared.clock()
    events.late(kind, now - dueAt)
    val next = dueAt + settings.jittered(interval, random.nextDouble()).toNanos
    val from = if next < now - interval.toNanos then now else next
    wake(tick, (from - now).max(0).nanos)
    from

  /** Every call's outcome comes back as a message. */
  private def send(through: Transport, request: Request)(reply: Reply => Command): Unit =
    pipe(through.send(request), Reply.Failed(FailureReason.ProtocolError))(reply)

  /** A future's outcome as a message to this device; `failure` stands for a failed future. */
  private def pipe[A](future: Future[A], failure: A)(message: A => Command): Unit =
    future.onComplete(result => self.tell(message(result.getOrElse(failure)), Actor.noSender))(using ExecutionContext.parasitic)

  private def mac: String = shared.identity(number).mac

  private def uptimeS: Long = (shared.clock() - startedAt) / 1_000_000_000L

  private def statsBody(mac: String, kind: StatsKind): Array[Byte] =
    val figures = kind match
      case StatsKind.System => s""""cpuPct":${random.nextInt(100)},"memFreeKb":${random.nextInt(1 << 20)}"""
      case StatsKind.Radio => s""""channel":${1 + random.nextInt(11)},"noiseDbm":${-95 + random.nextInt(10)}"""
      case StatsKind.Clients => s""""clients":${random.nextInt(64)}"""
    s"""{"mac":"$mac","uptimeS":$uptimeS,$figures}""".getBytes(java.nio.charset.StandardCharsets.UTF_8)
