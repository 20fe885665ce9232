package fleetsim.device

import fleetsim.transport.{FailureReason, IoThreads, MessageKind, Push, Reply, Session, SessionFailure, Sessions, Transport}
import org.apache.pekko.Done
import org.apache.pekko.actor.typed.ActorRef
import org.apache.pekko.actor.{Actor, Deploy, Props}
import org.slf4j.LoggerFactory

import java.util.random.RandomGenerator
import scala.concurrent.{ExecutionContext, Future}
import scala.concurrent.duration.*
import scala.util.control.NonFatal

/** One simulated device: joins the controller, opens its own session when the fleet's transport has
  * them (an SSH tunnel), reports on jittered schedules, brings itself up to date when a reply or a
  * push says it is behind, and recovers by itself from refusals, lost sessions, failed messages and
  * its own failures. It owns its lifecycle and its session; a failure ends the epoch, and the device
  * backs off and joins again. What its calls look like and what a reply means is its
  * [[DeviceProfile]]'s business; which transport carries them, its kind's.
  *
  * A profile without a join call (MQTT) joins by opening its session: Discovering while it
  * connects, and a lost session sends it back, after a backoff, to join again.
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
  /** A Stopped device starts again, as after a reboot; any other ignores it. */
  case object Restart extends Command
  /** What the fleet tells the devices numbered `from` until `until`, `among` those selected, in one
    * message for a group of devices, not one each; the others ignore it. `cause` is the run's action
    * it comes from, numbered from 0, or [[Switch.NoAction]] (a resize): a device an action reaches
    * owes that action a recovery, and reports it when it is Reporting again
    * ([[DeviceEvents.recovered]]). A device takes part in one action's recovery at a time.
    */
  sealed trait Switch extends Command:
    def from: Int
    def until: Int
    def among: Selection
    def cause: Int
    /** The same, for the devices numbered `from` until `until`. */
    def within(from: Int, until: Int): Switch
    def reaches(number: Int): Boolean = number >= from && number < until && among.contains(number)
  object Switch:
    /** The cause of a resize's switches: no action's. */
    val NoAction: Short = -1
    /** The most actions a run numbers: a device keeps the one it owes a recovery in a Short, with a bit for how it is timed. */
    val MaxActions: Int = 0x1fff

  /** Power off (`on` false: drop the session without a word, or with `goodbye` close it as on a
    * clean shutdown, and wait, Off) or, if Off for the same `cause`, on again, as after a reboot. The
    * fleet resizes and cuts power with it. A device powered on by an action times its recovery from
    * its power-on; an action's power-on never powers on a device another took out, and a resize takes
    * over a device an action took out.
    */
  final case class Power(from: Int, until: Int, on: Boolean, among: Selection = Selection.All, cause: Int = Switch.NoAction,
      goodbye: Boolean = false) extends Switch:
    def within(from: Int, until: Int): Power = copy(from = from, until = until)

  /** An action on the fleet's side that reaches the devices without touching them — a network fault on
    * their transport, their broker dropping them, new configuration rolled out. At its `Start` a
    * device in the fleet owes it a recovery — to be Reporting again, or with `applies` to apply
    * configuration — timed from the action's end: at its `End` (a fault lifted; a device still
    * Reporting then has recovered at once), or its `Moment` (a drop, a rollout: what is timed from,
    * nothing settled).
    */
  final case class Affect(from: Int, until: Int, among: Selection, cause: Int, phase: Affect.Phase, applies: Boolean = false) extends Switch:
    def within(from: Int, until: Int): Affect = copy(from = from, until = until)
  object Affect:
    enum Phase:
      case Start, End, Moment

  /** The boot delay is over: the first join. */
  private case object Boot extends Command
  private case object RetryJoin extends Command
  private case object RetrySession extends Command
  private final case class SessionOpened(result: Either[SessionFailure, Session]) extends Command
  private final case class SessionLost(session: Int) extends Command
  /** Session `session` brought a message unasked. */
  private final case class Pushed(session: Int, push: Push) extends Command
  /** Periodic message `message` is due. */
  private final case class Due(message: Int) extends Command
  /** One instance per message: the wheel holds a million wake-ups. */
  private val due = IndexedSeq.tabulate(256)(Due(_))
  // Replies carry the epoch they belong to, so replies from before a rejoin are ignored, and which
  // try of the call they answer (from 1).
  private final case class Replied(epoch: Int, call: Call, reply: Reply, attempt: Int) extends Command
  /** A failed call's next try ([[Call.retry]]) is due; a periodic call's, while its message is still on `round`. */
  private final case class Again(epoch: Int, call: Call, attempt: Int, round: Long) extends Command
  /** The reply a call's failed future stands for (a transport's never fails): one for all calls. */
  private val failedFuture = Reply.Failed(FailureReason.ProtocolError)
  /** The same for a session's open. */
  private val failedOpen: Either[SessionFailure, Session] = Left(SessionFailure.Failed(FailureReason.ProtocolError))

  /** What every device of a fleet shares; each device keeps one reference to it.
    *
    * @param profile builds the device's calls and reads their replies
    * @param http carries the join, every call when there are no sessions, and calls to URLs of their own
    * @param sessions opens the device's own session after each join (Tunneling), or as its join when
    *                 the profile has no join call; None = plain HTTP
    * @param wheel wakes the devices for their periodic sends and retries
    * @param clock nanoseconds on the wheel's clock (System.nanoTime; a test's manual time)
    * @param dispatchers device i runs on dispatcher i % size ([[DeviceDispatcher]]); none = Pekko's default
    * @param ends when this process's devices heard each action on the fleet's side end ([[Affect]])
    */
  final case class Shared(
      profile: DeviceProfile,
      settings: DeviceSettings,
      http: Transport,
      sessions: Option[Sessions],
      events: DeviceEvents,
      wheel: TimingWheel,
      draws: Draws,
      clock: () => Long = () => System.nanoTime(),
      dispatchers: IndexedSeq[String] = IndexedSeq.empty,
      ends: ActionEnds = ActionEnds()):
    require(profile.messages.size <= due.size, s"a profile may have at most ${due.size} periodic messages")
    require(profile.join.isDefined || sessions.isDefined, s"profile ${profile.name} joins by opening a session, and the fleet opens none")
    /** The periodic message a kind belongs to, by kind index; -1 for the join's and triggers' kinds. */
    private[device] val messageOf: Array[Int] = profile.kinds.map(k => profile.messages.indexWhere(_.kind == k)).toArray
    /** Each periodic message's jitter: its own, or the device setting. */
    private[device] val jitterOf: Array[Double] = profile.messages.map(_.jitter.getOrElse(settings.jitter)).toArray
    /** Each periodic message: whether its replies, when Ok, keep nothing (MQTT publishes). */
    private[device] val keepsNothing: Array[Boolean] = profile.messages.map(_.calls.forall(_.keepsNothing)).toArray
    /** The I/O threads the devices run on, device i on `io.of(i)` ([[DeviceDispatcher]]), when the
      * wheel ticks there too: where a device takes what comes at once ([[Device.take]]). Null otherwise.
      */
    private[device] val ownThreads: IoThreads = wheel.on.filter(_ => dispatchers.nonEmpty).orNull
    require(ownThreads == null || ownThreads.size == dispatchers.size, "a dispatcher for each of the wheel's I/O threads")
    /** In its own mailbox; one deployment for all devices on a dispatcher, where `withMailbox` would make one each. */
    private[device] val deploys =
      if dispatchers.isEmpty then IndexedSeq(Deploy(mailbox = DeviceMailbox.id))
      else dispatchers.map(d => Deploy(mailbox = DeviceMailbox.id, dispatcher = d))

  /** Device number `i` of the fleet; `context.actorOf` it, and `toTyped[Command]` its ref. */
  def props(i: Int, shared: Shared): Props = Props(new Device(i, shared)).copy(deploy = shared.deploys(i % shared.deploys.size))

  private val log = LoggerFactory.getLogger(classOf[Device])

  /** Set in the action a device owes a recovery when it is timed from the action's end ([[Affect]]). */
  private val Affected = 0x4000
  /** Set in the action a device owes a recovery when it is owed by applying configuration, not by Reporting. */
  private val Applies = 0x2000

  // What a device is to a call on its own thread (Device.take).
  private final val Ready: Byte = 0
  private final val Busy: Byte = 1
  private final val Gone: Byte = 2 // its actor stopped

private final class Device(val number: Int, shared: Device.Shared) extends Actor with DeviceScope with TimingWheel.Target:
  import Device.*
  import DeviceState.*
  import shared.{events, profile, settings, wheel}

  /** When it last booted: its uptime, and how long it took to recover from an action's power cut. */
  private var bootedAt = shared.clock()
  /** The action it owes a recovery, until it is Reporting again ([[Switch]]): the action's number,
    * with [[Affected]] set when it is timed from the action's end rather than from the device's
    * power-on. A Short, which fits in the padding of the object as it was: an Int made every device 8 bytes larger.
    */
  private var cutBy: Short = Switch.NoAction
  private var current = Discovering
  private var quiesced = false
  /** What comes on the device's own thread finds it: Ready, Busy handling a command, or Gone, its
    * actor stopped ([[take]]). A Byte, which fits where the object had room: two Booleans made
    * every device 8 bytes larger.
    */
  private var taking = Ready
  /** Joins or session openings failed in a row: the backoff grows with them. */
  private var failures = 0
  /** Epochs started: an epoch is a join (and its session) and what the device does until the next. */
  private var epoch = 0
  /** The profile's numbers and texts for this device, and each message's schedule ([[Registers]]). */
  val registers: Array[Long] = new Array[Long](profile.registers)
  val texts: Array[String] = if profile.texts == 0 then null else new Array[String](profile.texts)
  /** While ConfigDownloading: the trigger running, and which of its calls (trigger << 8 | call). */
  private var updating = 0
  /** The open session and its number, which tells its loss from an older one's. */
  private var session: Option[Session] = None
  private var sessionNumber = 0

  boot(first = true)

  def receive: Receive = { case command: Command => handle(command) }

  def woken(message: Any): Unit = take(message.asInstanceOf[Command])

  /** A wake-up, a reply or a push: handled at once when it comes on the device's own thread (its
    * transport's I/O thread, [[DeviceDispatcher]]) while the device is not busy with another, as a
    * message otherwise (docs/adr/0017). On that thread Pekko runs the device's mailbox too, so it
    * is never handling two at once. A message would cost a round of the mailbox, and its envelope,
    * young, kept in the device's old mailbox and actor cell: at 100,000 devices G1's refinement of
    * those cards was an eighth of the fleet's CPU.
    */
  private def take(command: Command): Unit =
    val io = shared.ownThreads
    val ownThread = io != null && io.current == io.of(number)
    if !ownThread || taking == Busy then self.tell(command, Actor.noSender)
    else if taking == Ready then handle(command)
    // Gone: dropped

  private def handle(command: Command): Unit =
    taking = Busy
    try
      if quiesced then whileQuiesced(command)
      else
        command match
          case Quiesce(replyTo) =>
            quiesced = true
            replyTo ! Done
          case switch: Switch if switch.reaches(number) => switched(switch)
          case _ =>
            current match
              case Discovering => discovering(command)
              case Backoff => backingOff(command)
              case Tunneling => tunneling(command)
              case Reporting | ConfigDownloading => online(command)
              case Stopped => if command == Restart then boot() else resting(command)
              case Off => resting(command)
    catch case NonFatal(e) => failed(e)
    finally if taking == Busy then taking = Ready

  override def postStop(): Unit =
    taking = Gone
    closeSession()
    events.stopped(current)

  // ---- what the device is to its profile ----

  def state: DeviceState = current
  def uptimeS: Long = (shared.clock() - bootedAt) / 1_000_000_000L
  /** What a template draws from: the moment the device set before rendering ([[draw]]). */
  def random: RandomGenerator = shared.draws.current

  // ---- states: what each does with a message; anything else is from an older epoch ----

  private def discovering(command: Command): Unit = command match
    case Replied(n, call, reply, attempt) if n == epoch && joining(call) =>
      read(call, reply, attempt) match
        case Outcome.Ok => joined()
        case Outcome.NotAdmitted => wake(RetryJoin, backoffDelay()) // ask again, more slowly each time
        case Outcome.RetryAfter(nanos) => backOff(nanos)
        case Outcome.Stop(reason) => stop(reason)
        case null => () // tried again
        case Outcome.Rejoin =>
          profile.forget(this) // a known device the controller no longer knows registers afresh
          backOff()
        case Outcome.Reauthenticate | Outcome.Failed | Outcome.Unusable(_) => backOff()
    case Again(n, call, attempt, _) if n == epoch && joining(call) => send(shared.http, call, attempt = attempt)
    case Boot => join()
    case SessionOpened(Right(opened)) => // the session was the join
      failures = 0
      attach(opened)
      startReporting()
    case SessionOpened(Left(_: SessionFailure.Refused)) => refusedSession()
    case SessionOpened(Left(_: SessionFailure.Failed)) => backOff()
    case RetryJoin => joinAgain()
    case Pushed(n, push) if n == sessionNumber + 1 => pushed(push) // before its session's opening: acted on once reporting
    case _ => unread(command)

  private def backingOff(command: Command): Unit = command match
    case RetryJoin => joinAgain()
    case _ => unread(command)

  /** Opening its session after a join (the state's name, Tunneling, is SSH's, as in the figures). */
  private def tunneling(command: Command): Unit = command match
    case SessionOpened(Right(opened)) =>
      attach(opened)
      startReporting()
    case SessionOpened(Left(_: SessionFailure.Refused)) => refusedSession()
    case SessionOpened(Left(_: SessionFailure.Failed)) => wake(RetrySession, backoffDelay())
    case RetrySession =>
      failures += 1
      openAfterJoin()
    case Pushed(n, push) if n == sessionNumber + 1 => pushed(push) // before its session's opening: acted on once reporting
    case _ => unread(command)

  /** Reporting and ConfigDownloading: the periodic sends, their replies, and bringing itself up to date. */
  private def online(command: Command): Unit = command match
    case Due(i) if !early(registers(Registers.dueAt(i))) => sendMessage(i)
    case Replied(n, call, reply, attempt) if n == epoch =>
      if current == ConfigDownloading && (call eq updatingCall) then updated(read(call, reply, attempt))
      else
        val i = shared.messageOf(call.kind.index)
        if i >= 0 then replied(i, read(call, reply, attempt))
    case Again(n, call, attempt, round) if n == epoch =>
      val i = shared.messageOf(call.kind.index)
      // A periodic call's tries end when its message's next round starts: one round in flight at a time, as an agent's loop.
      if i >= 0 && registers(Registers.seq(i)) == round || current == ConfigDownloading && (call eq updatingCall) then
        send(channelFor(call), call, attempt = attempt)
    case SessionLost(n) if n == sessionNumber => sessionLost()
    case Pushed(n, push) if n == sessionNumber => pushed(push)
    case _ => unread(command) // an older epoch's, or an older session's

  /** What a reply means, as the profile reads it into the device, counted as the profile judges it (a
    * 2xx it cannot use or reacts to as a failure failed, a status it expects ok); null when the call
    * failed and is tried again.
    */
  private def read(call: Call, reply: Reply, attempt: Int): Outcome =
    val outcome = call.read(reply, this)
    reply match
      case r: Reply.Response => outcome match
        case Outcome.Unusable(reason) => events.judged(call.kind, r, Some(reason))
        case Outcome.Ok => if !r.ok then events.judged(call.kind, r, None)
        case _ => if r.ok then events.judged(call.kind, r, Some(FailureReason.Rejected))
      case _ => ()
    outcome match
      case Outcome.Failed | Outcome.Unusable(_) if call.retry.exists(attempt < _.tries) =>
        val i = shared.messageOf(call.kind.index)
        val round = if i >= 0 then registers(Registers.seq(i)) else 0
        wake(Again(epoch, call, attempt + 1, round), call.retry.get.delay.pick(draw(Draws.Retry, call.kind.index, round << 8 | attempt)).nanos)
        null
      case _ => outcome

  /** Stopped or Off: a session that opens late is closed; anything else is unread. */
  private def resting(command: Command): Unit = command match
    case SessionOpened(Right(late)) => late.close()
    case _ => unread(command)

  /** A reply the device no longer reads (an older epoch's, or one come while it is Stopped or backing
    * off) is still counted as its call judges its status: an expected status ok, any other failed.
    */
  private def unread(command: Command): Unit = command match
    case Replied(_, call, r: Reply.Response, _) if r.ok != call.expects(r.status) =>
      events.judged(call.kind, r, if r.ok then Some(FailureReason.UnexpectedStatus) else None)
    case _ => ()

  /** A periodic message's reply: up to date, refused, or one more failure in a row. */
  private def replied(i: Int, outcome: Outcome): Unit = outcome match
    case Outcome.Ok =>
      registers(Registers.failures(i)) = 0
      if current == Reporting then update()
    case Outcome.Rejoin => refused()
    case Outcome.Reauthenticate => rejoin()
    case Outcome.RetryAfter(nanos) => postpone(i, nanos)
    case Outcome.Stop(reason) => stop(reason)
    case null => () // tried again
    case Outcome.Failed | Outcome.NotAdmitted | Outcome.Unusable(_) =>
      val failed = registers(Registers.failures(i)) + 1
      registers(Registers.failures(i)) = failed
      val limit = profile.messages(i).maxFailures.getOrElse(settings.maxLostHeartbeats)
      if limit > 0 && failed >= limit then
        if session.isDefined then sessionLost()
        else
          failures = 0
          backOff()

  /** A call of the running trigger came back: the next call, or up to date, or give up until the next announcement. */
  private def updated(outcome: Outcome): Unit = outcome match
    case Outcome.Ok =>
      val trigger = profile.triggers(updating >> 8)
      val next = (updating & 0xff) + 1
      if next < trigger.calls.size then updateStep(updating + 1)
      else
        trigger.applied(this)
        acknowledged()
        if cutBy != Switch.NoAction && (cutBy & Applies) != 0 then recovered()
        enter(Reporting)
    case Outcome.Rejoin => refused()
    case Outcome.Reauthenticate => rejoin()
    case Outcome.Stop(reason) => stop(reason)
    case null => () // tried again
    case _ => enter(Reporting) // unapplied: the next reply that says so starts it again

  /** The run is ending: send nothing more, let the calls in flight come home, keep the state. */
  private def whileQuiesced(command: Command): Unit = command match
    case SessionOpened(Right(late)) => late.close()
    case Quiesce(again) => again ! Done
    case Replied(_, call, reply, _) => read(call, reply, Int.MaxValue) // the last calls come home: counted for what they are, acted on no more
    case _ => ()

  // ---- transitions ----

  /** Starts as after a reboot: what it keeps at its defaults and as its identity row seeds it, and
    * after the profile's boot delay, if any, a join.
    */
  private def boot(first: Boolean = false): Unit =
    draw(Draws.Boot)
    profile.boot(this)
    failures = 0
    val delay = profile.startDelay(random)
    if delay > 0 then wake(Boot, delay.nanos) // before the move is seen: a test steps time once it sees it
    if first then events.moved(None, Discovering) else enter(Discovering)
    if delay <= 0 then join()

  private def join(): Unit =
    epoch += 1
    enter(Discovering)
    (if profile.resumes(this) then profile.resume else profile.join) match
      case Some(call) => send(shared.http, call)
      case None => openSession()

  /** The epoch's join is `join`, or `resume` for a device known already (no field of its own: a
    * million devices would pay for it).
    */
  private def joining(call: Call): Boolean = profile.join.contains(call) || profile.resume.contains(call)

  /** The device stops itself, as its profile says, until [[Device.Restart]]. */
  private def stop(reason: String): Unit =
    closeSession()
    enter(Stopped)
    events.halted(reason)

  /** A switch that reaches this device: its power, or an action on the fleet's side. */
  private def switched(switch: Switch): Unit = switch match
    case Power(_, _, on, _, cause, goodbye) =>
      if !on && current != Off then powerOff(cause.toShort, goodbye)
      else if !on && cause == Switch.NoAction then cutBy = Switch.NoAction // out of the fleet now: the action's end leaves it Off
      else if on && current == Off && cause == cutBy then
        bootedAt = shared.clock()
        boot()
    case Affect(_, _, _, cause, phase, applies) =>
      val owes = (cause | Affected | (if applies then Applies else 0)).toShort
      if phase == Affect.Phase.Start && cutBy == Switch.NoAction && current != Off then
        cutBy = owes
        events.cut(cause)
      if phase != Affect.Phase.Start then shared.ends.stamp(cause, shared.clock())
      if phase == Affect.Phase.End && cutBy == owes && current == Reporting && !applies then
        events.recovered(cause, 0)
        cutBy = Switch.NoAction

  /** Reporting again, or configuration applied for an action that waits for that: the recovery owed,
    * timed from its power-on or from the action's end.
    */
  private def recovered(): Unit =
    val action = cutBy & ~(Affected | Applies)
    val timed = (cutBy & Affected) == 0
    // Configuration applied before this process heard the action's moment: the fleet pushes it only
    // after telling the moment, so the moment is now at the latest (else the device stayed owed for ever).
    if (cutBy & Applies) != 0 then shared.ends.stamp(action, shared.clock())
    if timed || shared.ends.has(action) then // else an action on the fleet's side that is not over yet: the device is owed still
      events.recovered(action, shared.clock() - (if timed then bootedAt else shared.ends.of(action)))
      cutBy = Switch.NoAction

  /** Off, as when its power is cut (its session dropped without a word) or, with `goodbye`, as when
    * shut down (its session closed): nothing sent until powered on again. A new epoch: replies to
    * what it sent before are unread, whatever comes next.
    */
  private def powerOff(cause: Short, goodbye: Boolean): Unit =
    epoch += 1
    closeSession(goodbye)
    cutBy = cause
    enter(Off)
    if cause != Switch.NoAction then events.cut(cause)

  /** A backoff's wake-up: one more failure in a row, one more join. */
  private def joinAgain(): Unit =
    failures += 1
    join()

  private def joined(): Unit =
    failures = 0
    if shared.sessions.isDefined then openAfterJoin() else startReporting()

  /** Opens the device's own session now, after its join; on failure waits a backoff delay and tries again. */
  private def openAfterJoin(): Unit =
    enter(Tunneling)
    openSession()

  private def openSession(): Unit =
    val next = sessionNumber + 1 // the number it gets once open: pushes may come before the device hears it opened
    val pushed = (push: Push) => take(Pushed(next, push))
    pipe(shared.sessions.get.open(number, profile.login(this), profile.sessionOffer(this), pushed), failedOpen)(SessionOpened(_))

  private def attach(opened: Session): Unit =
    sessionNumber += 1
    session = Some(opened)
    val lost = SessionLost(sessionNumber)
    pipe(opened.lost, Done)(_ => lost)

  /** The server no longer admits this device (its session refused): join again, later. */
  private def refusedSession(): Unit =
    profile.forget(this)
    backOff()

  /** The session is gone or dead: after a jittered pause, so that a herd does not return as one, a
    * new session, or a new join when the session was the join.
    */
  private def sessionLost(): Unit =
    closeSession()
    failures = 0
    if profile.join.isEmpty then backOff()
    else
      wake(RetrySession, backoffDelay())
      enter(Tunneling)

  /** A push: what the profile keeps of it, then up to date if it says the device is behind. */
  private def pushed(push: Push): Unit =
    events.pushed()
    if profile.pushed(push, this) then
      val at = profile.pushedAt // the first push not yet acknowledged: the longer wait is the true one
      if registers(at) == 0 then registers(at) = shared.clock()
      if current == Reporting && !update() then registers(at) = 0 // nothing new: nothing to acknowledge

  /** A trigger ran to its end: if a push started it, how long the push took to be acknowledged. */
  private def acknowledged(): Unit =
    val at = profile.pushedAt
    if at >= 0 && registers(at) != 0 then
      events.pushAcknowledged(shared.clock() - registers(at))
      registers(at) = 0

  /** Starts an epoch's reporting: each message's schedule from the start. */
  private def startReporting(): Unit =
    epoch += 1
    var i = 0
    while i < profile.messages.size do
      registers(Registers.failures(i)) = 0
      registers(Registers.seq(i)) = 0
      registers(Registers.dueAt(i)) = schedule(due(i), profile.messages(i).first.delay(interval(i), draw(Draws.Phase, i)).nanos)
      i += 1
    if !update() then enter(Reporting)

  /** Sends message i's round, after scheduling the next one. */
  private def sendMessage(i: Int): Unit =
    val message = profile.messages(i)
    registers(Registers.dueAt(i)) = scheduleNext(i, registers(Registers.dueAt(i)))
    registers(Registers.seq(i)) += 1
    // With no failure in a row to clear, Ok replies that keep nothing change nothing: they stay on the
    // transport's thread instead of waking the device, a thread switch a publish
    // (bench/history/2026-11-23-mqtt-cpu-thread-crossings.md).
    if shared.keepsNothing(i) && registers(Registers.failures(i)) == 0 then
      message.calls.foreach(call => send(channelFor(call), call, quiet = true))
      if current == Reporting then update() // what their Ok replies would do
    else message.calls.foreach(call => send(channelFor(call), call))

  /** Runs the first trigger that is due, if any (the device is behind); says whether one runs. */
  private def update(): Boolean =
    var t = 0
    while t < profile.triggers.size && !profile.triggers(t).due(this) do t += 1
    val behind = t < profile.triggers.size
    if behind then
      enter(ConfigDownloading)
      updateStep(t << 8)
    behind

  private def updateStep(step: Int): Unit =
    updating = step
    send(channelFor(updatingCall), updatingCall)

  private def updatingCall: Call = profile.triggers(updating >> 8).calls(updating & 0xff)

  /** 403 from any call: forget the session, and join again. */
  private def refused(): Unit =
    profile.forget(this)
    rejoin()

  /** 401, or forgotten: join again now. */
  private def rejoin(): Unit =
    closeSession()
    failures = 0
    join()

  /** Waits a backoff delay (or what the controller asked for), then joins again. */
  private def backOff(nanos: Long = 0): Unit =
    closeSession()
    wake(RetryJoin, if nanos > 0 then nanos.nanos else backoffDelay())
    enter(Backoff)

  /** The controller asked for a pause (429, 503): message i waits that long, with jitter, before its next send. */
  private def postpone(i: Int, nanos: Long): Unit =
    val pause = if nanos > 0 then settings.jittered(nanos, draw(Draws.Pause, i, registers(Registers.seq(i))).nextDouble()) else backoffDelay().toNanos
    if shared.clock() + pause - registers(Registers.dueAt(i)) > 0 then registers(Registers.dueAt(i)) = schedule(due(i), pause.nanos)

  /** An exception inside the device: what a restart would do, without a supervisor per device. */
  private def failed(e: Throwable): Unit =
    log.warn("device {} failed in {}, joining again after a pause: {}", number, current, e.toString)
    profile.forget(this)
    backOff()

  // ---- plumbing ----

  /** Enters a state; entering is reported once, however often a state is re-entered. Wake-ups are
    * set before, so a test that steps time once it sees the move cannot step past them.
    */
  private def enter(next: DeviceState): Unit =
    if current != next then
      events.moved(Some(current), next)
      current = next
      if next == Reporting && cutBy != Switch.NoAction && (cutBy & Applies) == 0 then recovered()

  private def backoffDelay(): FiniteDuration = settings.backoff.delay(failures, draw(Draws.Backoff, failures).nextDouble())

  /** What a call of the epoch travels through: the session if there is one, unless the call names a URL of its own. */
  private def channelFor(call: Call): Transport = if call.toUrl then shared.http else session.getOrElse(shared.http)

  /** Closes the session, saying goodbye unless told not to ([[Session.cut]]). */
  private def closeSession(goodbye: Boolean = true): Unit =
    session.foreach(s => if goodbye then s.close() else s.cut())
    session = None

  /** Message i's interval, at least a millisecond: a controller's 0 must not make its devices spin. */
  private def interval(i: Int): Long = profile.messages(i).interval(this).max(1_000_000L)

  /** Wakes the device after `delay`; returns when it is meant to (on the clock). */
  private def schedule(tick: Command, delay: FiniteDuration): Long =
    wake(tick, delay)
    shared.clock() + delay.toNanos

  private def wake(tick: Command, delay: FiniteDuration): Unit = wheel.wake(delay, this, tick)

  /** The draws of this moment of the device's life: the same for the same seed, run after run ([[Draws]]). */
  private def draw(what: Int, a: Long = 0, b: Long = 0): RandomGenerator = shared.draws.at(number, epoch, what, a, b)

  /** Not due yet, so the wake-up was meant for an epoch before this one (the wheel is never early). */
  private def early(dueAt: Long): Boolean = dueAt - (shared.clock() + wheel.tick.toNanos) > 0

  /** Records how late this send left against its intended time, and schedules the next one an
    * interval after the intended time, not the actual one: an overloaded simulator then shows as
    * lateness instead of quietly sending less (coordinated omission). More than an interval behind,
    * it starts afresh from now rather than firing a burst to catch up.
    */
  private def scheduleNext(i: Int, dueAt: Long): Long =
    val message = profile.messages(i)
    val now = shared.clock()
    events.late(message.kind, now - dueAt)
    val every = interval(i)
    val next = dueAt + settings.jittered(every, draw(Draws.Jitter, i, registers(Registers.seq(i))).nextDouble(), shared.jitterOf(i))
    val from = if next < now - every then now else next
    wake(due(i), (from - now).max(0).nanos)
    from

  /** Every call's outcome comes back as a message; a quiet call's only when it is not a 2xx. */
  private def send(through: Transport, call: Call, quiet: Boolean = false, attempt: Int = 1): Unit =
    val n = epoch
    val i = shared.messageOf(call.kind.index)
    draw(Draws.Render, call.kind.index, (if i >= 0 then registers(Registers.seq(i)) else updating.toLong) << 8 | attempt)
    through.send(number, call.render(this)).onComplete { result =>
      val reply = result.getOrElse(failedFuture)
      val ok = reply match
        case r: Reply.Response => r.ok
        case _ => false
      if !(quiet && ok) then take(Replied(n, call, reply, attempt))
    }(using ExecutionContext.parasitic)

  /** A future's outcome, taken by this device ([[take]]); `failure` stands for a failed future. */
  private def pipe[A](future: Future[A], failure: A)(message: A => Command): Unit =
    future.onComplete(result => take(message(result.getOrElse(failure))))(using ExecutionContext.parasitic)
