package fleetsim.device

import fleetsim.transport.IoThreads
import org.apache.pekko.actor.ActorRef

import java.util.concurrent.locks.LockSupport
import scala.concurrent.duration.*
import scala.util.control.NonFatal

/** One timing wheel for the whole fleet, in place of Pekko timers in every device: a wake-up costs
  * 16 bytes in an array instead of about 100 in five objects, and one ticker serves a million
  * devices (bench/history/2026-11-21-scale-http-timing-wheel.md). A wake-up cannot be cancelled: a
  * device ignores the ones it no longer expects.
  *
  * The ticker is a thread of its own that sleeps until the next tick: on the busy dispatcher it fell
  * a minute behind at a million devices, and on Pekko's scheduler, which ticks out of step with the
  * wheel, a send waited for both. Each tick catches up with the clock, however late it is. Ticks of
  * 10 ms send in batches, which the connections write together: at 1 ms the fleet spent 80% more
  * CPU a message, on more writes and more threads woken
  * (bench/history/2026-11-22-scale-http-nothing-young.md).
  *
  * Targets are the devices themselves ([[TimingWheel.Target]]), old objects all: a typed ref would
  * be a new adapter per wake-up, kept a minute and so copied by the collector into the old generation.
  *
  * Devices that run on their transport's I/O threads ([[DeviceDispatcher]]) get a wheel on each of
  * those threads instead, ticking there, and only for ticks that have wake-ups: a wake-up fires on
  * the thread that asked for it, where its device runs and takes it at once (docs/adr/0017), and a
  * tick wakes no other thread.
  *
  * @param clock nanoseconds (System.nanoTime; a test's manual time)
  * @param slots one turn of the wheel; wake-ups further out wait in their slot for their turn
  * @param on I/O threads to tick on, a wheel each; None = one wheel on a thread of its own
  */
final class TimingWheel(clock: () => Long = () => System.nanoTime(), val tick: FiniteDuration = 10.millis,
    slots: Int = 1 << 15, val on: Option[IoThreads] = None):
  import TimingWheel.Target

  private final class Slot:
    // Empty until used: most of the 32,768 slots are, in a small fleet.
    var targets = Array.empty[Target]
    var messages = Array.empty[Any]
    var dueTicks = Array.empty[Long]
    var size = 0

    def add(target: Target, message: Any, due: Long): Unit =
      if size == targets.length then resize((size * 2).max(4))
      targets(size) = target
      messages(size) = message
      dueTicks(size) = due
      size += 1

    /** Moves the wake-ups due by `now` to `fired`, keeping the rest in order. */
    def takeDue(now: Long, fired: Slot): Unit =
      var kept = 0
      var i = 0
      while i < size do
        if dueTicks(i) <= now then fired.add(targets(i), messages(i), dueTicks(i))
        else
          targets(kept) = targets(i)
          messages(kept) = messages(i)
          dueTicks(kept) = dueTicks(i)
          kept += 1
        i += 1
      java.util.Arrays.fill(targets.asInstanceOf[Array[AnyRef]], kept, size, null)
      java.util.Arrays.fill(messages.asInstanceOf[Array[AnyRef]], kept, size, null)
      size = kept
      // Room follows what the slot holds: the next minute's slots are crowded, the others nearly empty.
      if targets.length > 4 && size < targets.length / 4 then resize((size * 2).max(4))

    /** Wakes all it holds, in order, and empties: a tick's wake-ups, once its slot's lock is let go,
      * so that a device taking one at once on its own thread may ask the wheel for its next. A target
      * that throws (a device catches its own failures) is reported as its thread reports an uncaught
      * one, and the tick's other wake-ups still come: one failure must not stop every device's clock.
      */
    def wakeAll(): Unit =
      var i = 0
      while i < size do
        val target = targets(i)
        val message = messages(i)
        targets(i) = null
        messages(i) = null
        try target.woken(message)
        catch case NonFatal(e) => Thread.currentThread.getUncaughtExceptionHandler.uncaughtException(Thread.currentThread, e)
        i += 1
      size = 0

    private def resize(capacity: Int): Unit =
      targets = java.util.Arrays.copyOf(targets.asInstanceOf[Array[AnyRef]], capacity).asInstanceOf[Array[Target]]
      messages = java.util.Arrays.copyOf(messages.asInstanceOf[Array[AnyRef]], capacity).asInstanceOf[Array[Any]]
      dueTicks = java.util.Arrays.copyOf(dueTicks, capacity)

  /** One wheel and the ticks it has run. */
  private class Ring:
    private val wheel = Array.fill(slots)(Slot())
    @volatile private var now = 0L // ticks run so far
    private val fired = Slot() // the tick's wake-ups being woken; for the thread that ticks

    /** Keeps the wake-up for its tick, or wakes the target now if that tick has run; whether it was kept. */
    def add(target: Target, message: Any, due: Long): Boolean =
      val slot = wheel((due % slots).toInt)
      val passed = slot.synchronized {
        // The ticker may already have run past this tick (it lags the clock by up to a tick): due now.
        val passed = due <= now
        if !passed then slot.add(target, message, due)
        passed
      }
      if passed then target.woken(message)
      !passed

    /** Runs the ticks due by the clock; the time elapsed and when the next tick is due. */
    def catchUp(): Long =
      val elapsed = clock() - start
      while now < elapsed / tickNanos do
        val at = now + 1
        now = at
        val slot = wheel((at % slots).toInt)
        slot.synchronized(slot.takeDue(at, fired))
        fired.wakeAll()
      (now + 1) * tickNanos - elapsed

    /** The next tick whose slot holds a wake-up (perhaps one for a later turn), looking `horizon`
      * ticks ahead at most. For the thread that adds to this ring, which alone sees its slots' sizes.
      */
    def nextBusy(horizon: Int): Long =
      var at = now + 1
      while at < now + horizon && wheel((at % slots).toInt).size == 0 do at += 1
      at

  /** A ring on I/O thread `thread`, which wakes it only for a tick whose slot holds a wake-up. A
    * thread's wake-up costs tens of µs of CPU here, and at 100 publishes a second two loops ticking
    * every 10 ms woke 200 times a second for them; now 26% fewer context switches and 6-11% less
    * CPU (bench/history/2026-11-23-mqtt-fixed-cost.md). Only that thread adds to the ring and arms
    * it.
    */
  private final class LoopRing(io: IoThreads, thread: Int) extends Ring:
    private var armedFor = Long.MaxValue // the tick the loop is to wake for
    private var armed: java.util.concurrent.Future[?] = null
    // How far a tick looks for the next busy slot; beyond, it wakes to look again.
    private val horizon = slots.min((1.second / tick).toInt.max(1))

    override def add(target: Target, message: Any, due: Long): Boolean =
      val kept = super.add(target, message, due)
      if kept then arm(due) // one sent at once needs no tick
      kept

    private def arm(at: Long): Unit = if at < armedFor && !closed then
      if armed != null then armed.cancel(false)
      armedFor = at
      armed = io.after(thread, (at * tickNanos - (clock() - start)).max(0).nanos) { () =>
        armed = null
        run()
      }

    /** Runs the ticks due, then arms for the next busy one. What the ticks' devices ask for meanwhile
      * arms nothing: each wake-up earlier than any before would set a timer (a device's next send, a
      * heartbeat later) and cancel the last, which stays queued until its time. At 1M devices
      * 166,000 such timers lived up to a minute each, long enough for G1 to promote them.
      */
    private def run(): Unit = if !closed then
      armedFor = Long.MinValue
      try catchUp()
      finally
        armedFor = Long.MaxValue
        arm(nextBusy(horizon))

    io.execute(thread, () => run()) // the first look for a busy tick

  private val tickNanos = tick.toNanos
  private val start = clock()
  @volatile private var closed = false
  private val rings: Array[Ring] = on match
    case Some(io) => Array.tabulate(io.size)(LoopRing(io, _))
    case None => Array(Ring())
  private val stop: () => Unit = on match
    case Some(_) => () => ()
    case None =>
      val ticker = Thread(() => while !closed do LockSupport.parkNanos(rings(0).catchUp()), "fleetsim-timing-wheel")
      ticker.setDaemon(true)
      ticker.start()
      () => LockSupport.unpark(ticker)

  /** Wakes `target` with `message` after `delay`, never earlier, and at most a tick or so later; on
    * I/O threads, from the thread that asks (from another thread: from the first I/O thread).
    */
  def wake(delay: FiniteDuration, target: Target, message: Any): Unit =
    val due = (clock() - start + delay.toNanos + tickNanos - 1) / tickNanos
    on match
      case None => rings(0).add(target, message, due)
      case Some(io) =>
        val thread = io.current
        if thread >= 0 then rings(thread).add(target, message, due)
        else io.execute(0, () => rings(0).add(target, message, due))

  def close(): Unit =
    closed = true
    stop()

object TimingWheel:
  /** What a wake-up wakes: a device, which takes it at once on its own thread ([[Device]]), or an
    * actor told it ([[told]]).
    */
  trait Target:
    def woken(message: Any): Unit

  /** `actor`, told its wake-ups. */
  def told(actor: ActorRef): Target = message => actor.tell(message, ActorRef.noSender)
