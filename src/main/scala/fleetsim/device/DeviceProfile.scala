package fleetsim.device

import fleetsim.transport.{FailureReason, MessageKind, Push, Reply, Request, SessionOffer}
import fleetsim.transport.ssh.SshEndpoint

import java.util.random.RandomGenerator

/** How a fleet's devices speak to their controller: what their calls look like and what a reply
  * means. The device keeps the lifecycle (states, schedules, backoff, lateness, tunnel); a profile,
  * held once for the whole fleet, builds its requests and reads its replies. Whatever it keeps of
  * a device lives in the device's [[DeviceScope.registers]] and [[DeviceScope.texts]].
  */
trait DeviceProfile:
  def name: String
  /** Every kind of call the profile makes, `kinds(i).index == i`. */
  def kinds: IndexedSeq[MessageKind]
  /** The call a device joins with; None: opening its session is the join (MQTT's CONNECT). */
  def join: Option[Call]
  /** The call a device that is known already joins with instead ([[resumes]]); None: always `join`. */
  def resume: Option[Call]
  /** Whether the device starts its next session with `resume`: it holds what a join would have
    * given it (seeded from its identity row) and has not forgotten it since.
    */
  def resumes(device: DeviceScope): Boolean
  /** Sets a device up as it boots: every kept value at its default, then what its identity row seeds. */
  def boot(device: DeviceScope): Unit
  /** A random pause before a booted device's first call (an agent's sleep at start); 0 for none. */
  def startDelay(random: RandomGenerator): Long
  /** The messages sent on schedules while Reporting. */
  def messages: IndexedSeq[Periodic]
  /** Calls a second a device makes while Reporting, from its messages' intervals; None when an
    * interval is not known before the device joins (a reply gives it), or it sends nothing on a schedule.
    */
  final def callsPerSecond: Option[Double] =
    val rates = messages.map(m => m.every.map(m.calls.size * 1e9 / _))
    Option.when(rates.nonEmpty && rates.forall(_.isDefined))(rates.flatten.sum)
  /** Calls run when a value read from a reply says the device is out of date (new configuration). */
  def triggers: IndexedSeq[Trigger]
  /** Numbers kept per device, counting the device's own two per message ([[Registers]]). */
  def registers: Int
  /** Texts kept per device (tokens, ids read from replies); 0 keeps none. */
  def texts: Int
  /** The name a device's session logs in with (over SSH: its user). */
  def login(device: DeviceScope): String
  /** What the device's join said of its session, for its transport's sessions to read; None = the
    * transport's own setting. Profiles read one offer so far: the SSH server the join named.
    */
  def sessionOffer(device: DeviceScope): Option[SessionOffer] = sshEndpoint(device)
  /** The profile's `ssh` section: where the device's tunnel goes, as the join reply said. (Its own
    * kind's profile section once ProfileLoader reads one a kind: docs/adr/0010.)
    */
  def sshEndpoint(device: DeviceScope): Option[SshEndpoint]
  /** A 403 from any call: forget what the session kept (configuration applied included). */
  def forget(device: DeviceScope): Unit
  /** Reads what the profile keeps of a push into the device; false when it keeps none or the push
    * is unusable. A true push then runs the triggers, as a reply that says the device is behind does.
    */
  def pushed(push: Push, device: DeviceScope): Boolean
  /** The register holding when the oldest push not yet acknowledged arrived (0: none); -1 when the
    * profile takes no pushes.
    */
  def pushedAt: Int

/** Where a device keeps its numbers: first its own three per message, then the profile's. */
object Registers:
  /** When message `i` is next due, on the device's clock. */
  def dueAt(i: Int): Int = 3 * i
  /** Failed sends of message `i` in a row. */
  def failures(i: Int): Int = 3 * i + 1
  /** Rounds of message `i` sent this session, the one being rendered included (a template's `seq`). */
  def seq(i: Int): Int = 3 * i + 2
  /** The first register a profile may use. */
  def profileBase(messages: Int): Int = 3 * messages

/** One call a profile can make: what it sends, and what its reply means to the device. */
trait Call:
  def kind: MessageKind
  def render(device: DeviceScope): Request
  /** Reads what the profile keeps from the reply into the device, and says what it means. */
  def read(reply: Reply, device: DeviceScope): Outcome
  /** A 2xx reply keeps nothing and means Ok: the device need not hear of it (an MQTT publish). */
  def keepsNothing: Boolean = false
  /** Its request's path is an absolute URL: it goes to that server over HTTP(S), not through the
    * device's session (an MQTT device fetching a document a push named). */
  def toUrl: Boolean = false
  /** Tries of a call that failed, within its cycle, before it counts as failed; each try is a call
    * of its own, counted. None: one try.
    */
  def retry: Option[Retry] = None
  /** How long the call waits for its reply, in nanoseconds; 0: the transport's own timeout. */
  def timeout: Long = 0
  /** Whether `status` is success for this call (any 2xx unless it says otherwise): how a reply the
    * device no longer reads (from an older session, or while it is Stopped) is still counted.
    */
  def expects(status: Int): Boolean = status / 100 == 2

/** A call tried up to `tries` times, a random pause from `delay` (nanoseconds) between tries. */
final case class Retry(tries: Int, delay: Spread)

/** A random length of time from `min` to `max` nanoseconds (a HOCON `2s..15s`; one value for both). */
final case class Spread(min: Long, max: Long):
  def pick(random: RandomGenerator): Long = if max <= min then min else min + (random.nextDouble() * (max - min)).toLong
  override def toString: String = if min == max then Spread.show(min) else s"${Spread.show(min)}..${Spread.show(max)}"

object Spread:
  /** 2s, 1500ms: as a profile would write it. */
  def show(nanos: Long): String =
    if nanos % 1_000_000_000L == 0 then s"${nanos / 1_000_000_000L}s"
    else if nanos % 1_000_000L == 0 then s"${nanos / 1_000_000L}ms"
    else s"${nanos}ns"

/** A message sent on a schedule: a round of one or more calls every interval.
  *
  * @param every the interval in nanoseconds when the profile gives it, None when a reply does
  * @param jitter each send moves by up to this fraction of the interval, either way; None = the device setting
  * @param maxFailures failed rounds in a row that send the device to Backoff; 0 = never, None = the
  *                    device's max-lost-heartbeats
  * @param first when the first round is sent once the session starts
  */
final case class Periodic(kind: MessageKind, calls: IndexedSeq[Call], interval: DeviceScope => Long, jitter: Option[Double],
    maxFailures: Option[Int], first: First = First.RandomPhase, every: Option[Long] = None)

/** When a message's first round is sent once a session starts. */
enum First:
  /** At a random phase of its interval, the default: a fleet that joined together must not report together. */
  case RandomPhase
  /** At once: an agent that polls as soon as it has registered. */
  case AtJoin
  /** After a random pause from a range. */
  case After(delay: Spread)

  /** Nanoseconds from the session's start, for a message sent every `interval` nanoseconds. */
  def delay(interval: Long, random: RandomGenerator): Long = this match
    case RandomPhase => (interval * random.nextDouble()).toLong
    case AtJoin => 0
    case After(spread) => spread.pick(random)

  override def toString: String = this match
    case RandomPhase => "random-phase"
    case AtJoin => "at-join"
    case After(spread) => s"after $spread"

/** Brings a device up to date: when `due`, the device is ConfigDownloading while `calls` run in
  * order (a download, then a report that it was applied); once all succeed, `applied`.
  */
final case class Trigger(calls: IndexedSeq[Call], due: DeviceScope => Boolean, applied: DeviceScope => Unit)

/** What a reply means to the device's lifecycle. */
enum Outcome:
  case Ok
  /** At join: not admitted yet; ask again later, more slowly each time. */
  case NotAdmitted
  /** 401: join again, keeping what the device has. */
  case Reauthenticate
  /** 403: forget the session and join again. */
  case Rejoin
  /** 429/503: come back after this many nanoseconds. */
  case RetryAfter(nanos: Long)
  case Failed
  /** A reply the transport counted by its status that the device cannot use: a 2xx without a value
    * the profile needs (`unreadable`), a status the call does not expect, a check that failed.
    */
  case Unusable(reason: FailureReason)
  /** The device stops itself, as its profile says ("join: 403"), until restarted. */
  case Stop(reason: String)

/** What a profile sees of one device while it renders a call or reads a reply. */
trait DeviceScope:
  /** The device's number in the fleet, from 0. */
  def number: Int
  def state: DeviceState
  def uptimeS: Long
  def random: RandomGenerator
  def registers: Array[Long]
  /** null when the profile keeps no texts. */
  def texts: Array[String]
