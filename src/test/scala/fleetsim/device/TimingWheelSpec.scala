package fleetsim.device

import fleetsim.transport.IoThreads
import org.apache.pekko.actor.testkit.typed.scaladsl.ScalaTestWithActorTestKit
import org.apache.pekko.actor.typed.scaladsl.adapter.*
import org.scalatest.wordspec.AnyWordSpecLike

import java.util.concurrent.atomic.AtomicInteger
import java.util.concurrent.{Executors, TimeUnit}
import scala.concurrent.duration.*

/** The fleet's timing wheel, on a clock stepped by hand: wake-ups come on time, never early. The
  * ticker sees each step within a tick of real time (10 ms here), so "nothing yet" waits 20 ms.
  */
class TimingWheelSpec extends ScalaTestWithActorTestKit with AnyWordSpecLike:
  @volatile private var now = 0L
  private def pass(d: FiniteDuration): Unit = now += d.toNanos

  "The timing wheel" should {
    "wake each target no earlier than asked and within a tick after" in {
      val wheel = TimingWheel(() => now, tick = 10.millis, slots = 64)
      val probe = createTestProbe[Int]()
      (1 to 5).foreach(i => wheel.wake((i * 100 + 5).millis, TimingWheel.told(probe.ref.toClassic), i)) // between two ticks
      for i <- 1 to 5 do
        pass(if i == 1 then 100.millis else 90.millis)
        probe.expectNoMessage(20.millis) // at i x 100 ms: 5 ms early
        pass(10.millis)
        probe.expectMessage(i)
      wheel.close()
    }

    "keep a wake-up further out than one turn of the wheel until its turn" in {
      val wheel = TimingWheel(() => now, tick = 10.millis, slots = 8) // one turn: 80 ms
      val probe = createTestProbe[String]()
      wheel.wake(250.millis, TimingWheel.told(probe.ref.toClassic), "late")
      (1 to 24).foreach(_ => pass(10.millis))
      probe.expectNoMessage(20.millis)
      pass(10.millis)
      probe.expectMessage("late")
      wheel.close()
    }

    "deliver every wake-up of a crowded slot, turn after turn, as its room grows and shrinks" in {
      val wheel = TimingWheel(() => now, tick = 10.millis, slots = 8)
      val probe = createTestProbe[Int]()
      for round <- 1 to 3 do
        val crowd = if round == 2 then 5 else 1000 // a burst, a lull, a burst again
        (1 to crowd).foreach(i => wheel.wake(40.millis, TimingWheel.told(probe.ref.toClassic), i))
        // The same slot two turns later: must wait for its turn in the crowded slot.
        wheel.wake(200.millis, TimingWheel.told(probe.ref.toClassic), -round)
        pass(40.millis)
        assert(probe.receiveMessages(crowd).toSet == (1 to crowd).toSet)
        pass(80.millis)
        probe.expectNoMessage(20.millis)
        pass(80.millis)
        probe.expectMessage(-round)
      wheel.close()
    }

    "let a target ask from inside its wake-up for its next, in the very slot being woken" in {
      val wheel = TimingWheel(() => now, tick = 10.millis, slots = 8) // one turn: 80 ms, so the next is in the same slot
      val probe = createTestProbe[Int]()
      // As a device takes its wake-up on its own thread: woken with a call, and asking for the next
      // there, before it says so (once it has, this test moves the clock on).
      lazy val again: TimingWheel.Target = message =>
        val i = message.asInstanceOf[Int]
        if i < 5 then wheel.wake(80.millis, again, i + 1)
        probe.ref ! i
      wheel.wake(80.millis, again, 1)
      for i <- 1 to 5 do
        pass(70.millis)
        probe.expectNoMessage(20.millis)
        pass(10.millis)
        probe.expectMessage(i)
      wheel.close()
    }

    "wake an I/O thread only for the ticks that have wake-ups, whoever asks" in onOneThread { (io, wheel) =>
      val probe = createTestProbe[String]()
      val asked = System.nanoTime()
      // From a thread that is not the I/O thread: the wake-up is handed to it.
      wheel.wake(300.millis, TimingWheel.told(probe.ref.toClassic), "woke")
      probe.expectMessage(5.seconds, "woke")
      assert(System.nanoTime() - asked >= 300.millis.toNanos, "woken early")
      // Ticking every 10 ms would have woken the thread 30 times by now.
      assert(io.wokenFor.get <= 3, s"${io.wokenFor.get} wake-ups of the I/O thread for one wake-up")
    }

    "set one timer for a tick, however many of its wake-ups ask for their next from inside it" in onOneThread { (io, wheel) =>
      val probe = createTestProbe[Int]()
      val quiet: TimingWheel.Target = _ => ()
      // Fifty devices woken in one tick, each asking for its next sooner than the one before asked:
      // each the earliest yet, which used to set a timer and cancel the last (queued until its time,
      // up to a heartbeat later).
      val device: TimingWheel.Target = message =>
        val i = message.asInstanceOf[Int]
        wheel.wake(10.seconds - (i * 10).millis, quiet, i)
        probe.ref ! i
      (1 to 50).foreach(i => wheel.wake(100.millis, device, i))
      probe.receiveMessages(50, 5.seconds)
      // The first look's (a second on, the wheel empty), the tick's, and after it one a second on;
      // and one more should the first look come after the wake-ups were handed over.
      assert(io.timersSet.get <= 4, s"${io.timersSet.get} timers set for one tick of 50 wake-ups")
    }

    "still wake a tick's other targets, and tick on, when one throws" in onOneThread { (io, wheel) =>
      val probe = createTestProbe[Int]()
      val told = TimingWheel.told(probe.ref.toClassic)
      val failing: TimingWheel.Target = _ => throw IllegalStateException("a target's bug")
      wheel.wake(50.millis, told, 1)
      wheel.wake(50.millis, failing, 0)
      wheel.wake(50.millis, told, 2)
      probe.expectMessage(5.seconds, 1)
      probe.expectMessage(5.seconds, 2)
      wheel.wake(50.millis, told, 3) // a later tick: the ring is armed again
      probe.expectMessage(5.seconds, 3)
      assert(io.uncaught.get == 1, "the failure reported as the thread reports an uncaught one")
    }
  }

  /** A wheel on one I/O thread, on the real clock (the thread sleeps on it), closed after `test`. */
  private def onOneThread(test: (OneThread, TimingWheel) => Unit): Unit =
    val io = OneThread()
    val wheel = TimingWheel(tick = 10.millis, on = Some(io))
    try test(io, wheel)
    finally
      wheel.close()
      io.shutdown()

  /** One I/O thread that counts the timers set on it, the times it was woken for one, and the
    * failures reported to it.
    */
  private final class OneThread extends IoThreads:
    val uncaught = AtomicInteger()
    private val executor = Executors.newSingleThreadScheduledExecutor { r =>
      val thread = Thread(r, "io-0")
      thread.setUncaughtExceptionHandler((_, _) => uncaught.incrementAndGet())
      thread
    }
    val wokenFor = AtomicInteger()
    val timersSet = AtomicInteger()
    def size: Int = 1
    def current: Int = if Thread.currentThread.getName == "io-0" then 0 else -1
    def execute(thread: Int, task: Runnable): Unit = executor.execute(task)
    def after(thread: Int, delay: FiniteDuration)(task: () => Unit): java.util.concurrent.Future[?] =
      timersSet.incrementAndGet()
      executor.schedule((() => { wokenFor.incrementAndGet(); task() }): Runnable, delay.toNanos, TimeUnit.NANOSECONDS)
    def shutdown(): Unit = executor.shutdown()
