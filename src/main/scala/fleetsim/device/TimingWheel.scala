package fleetsim.device

import org.apache.pekko.actor.Cancellable
import org.apache.pekko.actor.typed.{ActorRef, Scheduler}

import scala.collection.mutable.ArrayBuffer
import scala.concurrent.ExecutionContext
import scala.concurrent.duration.*

/** One timing wheel for the whole fleet, in place of Pekko timers in every device: a wake-up costs
  * 16 bytes in an array instead of about 100 in five objects, and one ticker serves a million
  * devices (BENCHMARKS.md, "Scale with the fleet's timing wheel"). A wake-up cannot be cancelled:
  * a device ignores the ones it no longer expects.
  *
  * The ticker runs on the scheduler's own thread, as Pekko's timers do: on the busy dispatcher it
  * fell a minute behind at a million devices. Each run catches up with the clock, however late it is.
  *
  * @param clock nanoseconds (System.nanoTime; a test's manual time)
  * @param slots one turn of the wheel; wake-ups further out wait in their slot for their turn
  */
final class TimingWheel(scheduler: Scheduler, clock: () => Long = () => System.nanoTime(), val tick: FiniteDuration = 10.millis,
    slots: Int = 1 << 15):
  private final class Slot:
    var targets = new Array[ActorRef[Any]](4)
    var messages = new Array[Any](4)
    var dueTicks = new Array[Long](4)
    var size = 0

    def add(target: ActorRef[Any], message: Any, due: Long): Unit =
      if size == targets.length then resize(size * 2)
      targets(size) = target
      messages(size) = message
      dueTicks(size) = due
      size += 1

    /** Moves the wake-ups due by `now` into `due`, keeping the rest in order. */
    def takeDue(now: Long, due: ArrayBuffer[(ActorRef[Any], Any)]): Unit =
      var kept = 0
      for i <- 0 until size do
        if dueTicks(i) <= now then due += targets(i) -> messages(i)
        else
          targets(kept) = targets(i)
          messages(kept) = messages(i)
          dueTicks(kept) = dueTicks(i)
          kept += 1
      java.util.Arrays.fill(targets.asInstanceOf[Array[AnyRef]], kept, size, null)
      java.util.Arrays.fill(messages.asInstanceOf[Array[AnyRef]], kept, size, null)
      size = kept
      // Room follows what the slot holds: the next minute's slots are crowded, the others nearly empty.
      if targets.length > 4 && size < targets.length / 4 then resize((size * 2).max(4))

    private def resize(capacity: Int): Unit =
      targets = java.util.Arrays.copyOf(targets, capacity)
      messages = java.util.Arrays.copyOf(messages.asInstanceOf[Array[AnyRef]], capacity).asInstanceOf[Array[Any]]
      dueTicks = java.util.Arrays.copyOf(dueTicks, capacity)

  private val wheel = Array.fill(slots)(Slot())
  private val start = clock()
  @volatile private var now = 0L // ticks run so far
  private val ticker: Cancellable =
    scheduler.scheduleAtFixedRate(tick, tick)(() => while now < (clock() - start) / tick.toNanos do advance())(using ExecutionContext.parasitic)

  /** Sends `message` to `target` after `delay`, never earlier, and at most a tick or so later. */
  def wake[T](delay: FiniteDuration, target: ActorRef[T], message: T): Unit =
    val due = (clock() - start + delay.toNanos + tick.toNanos - 1) / tick.toNanos
    val slot = wheel((due % slots).toInt)
    val passed = slot.synchronized {
      // The ticker may already have run past this tick (it lags the clock by up to a tick): due now.
      val passed = due <= now
      if !passed then slot.add(target.unsafeUpcast[Any], message, due)
      passed
    }
    if passed then target ! message

  def close(): Unit = ticker.cancel()

  private def advance(): Unit =
    val at = now + 1
    now = at
    val slot = wheel((at % slots).toInt)
    val due = ArrayBuffer.empty[(ActorRef[Any], Any)]
    slot.synchronized(slot.takeDue(at, due))
    due.foreach((target, message) => target ! message)
