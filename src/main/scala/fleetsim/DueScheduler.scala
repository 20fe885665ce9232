package fleetsim

import com.typesafe.config.Config
import org.apache.pekko.actor.{Cancellable, Scheduler}
import org.apache.pekko.event.LoggingAdapter

import java.io.Closeable
import java.util.concurrent.atomic.AtomicBoolean
import java.util.concurrent.{ConcurrentHashMap, RejectedExecutionException, ScheduledFuture, ScheduledThreadPoolExecutor, ThreadFactory, TimeUnit}
import scala.concurrent.ExecutionContext
import scala.concurrent.duration.FiniteDuration
import scala.util.control.NonFatal

/** The actor system's scheduler (`pekko.scheduler.implementation`): its one thread sleeps until a
  * task is due, and hands the task to its executor then, to the JDK's timer precision.
  *
  * Pekko's own scheduler wakes on every tick, busy or not. Its loop never returns, so the JIT
  * compiles it late, and it runs interpreted for the first minutes. In a fleet of 1,000 MQTT
  * devices, with nothing scheduled on it, it was the largest user of CPU after the JIT compilers:
  * 4.5 ms a second (bench/history/2026-11-27-a-scheduler-that-sleeps.md). Devices keep their own
  * timers ([[fleetsim.device.TimingWheel]]). What is left here is timeouts, the status line and
  * faults, and in the reference controller a timeout set and cancelled per request (Pekko HTTP's
  * request timeout): at 28,000 a second, this costs what Pekko's does.
  *
  * Pekko builds it by reflection from the system's config, a log and a thread factory.
  */
final class DueScheduler(config: Config, log: LoggingAdapter, threads: ThreadFactory) extends Scheduler, Closeable:
  private val timer = ScheduledThreadPoolExecutor(1, threads)
  timer.setRemoveOnCancelPolicy(true) // a cancelled timeout leaves the queue now, not when it was due
  timer.setExecuteExistingDelayedTasksAfterShutdownPolicy(false)
  // A task due within the second keeps the queue's head near. A later task, such as a request's
  // 20 s timeout set while no other was waiting, is then never the head, so setting it does not
  // wake the thread to wait for it instead (3 µs of CPU more a timeout, when it did).
  timer.scheduleAtFixedRate(() => (), 1, 1, TimeUnit.SECONDS)

  /** Tasks Pekko needs run when the scheduler closes, however early (its dispatchers' shutdowns):
    * each is run once, by whichever removes it from here first, the timer or [[close]].
    */
  private val runOnClose = ConcurrentHashMap.newKeySet[Runnable]()

  /** Its timer's resolution; a cluster whose own scheduler needs more ticks than this builds one of its own. */
  val maxFrequency: Double = 1000

  def scheduleOnce(delay: FiniteDuration, runnable: Runnable)(implicit executor: ExecutionContext): Cancellable =
    if delay.length <= 0 then
      if timer.isShutdown then throw refused(null)
      executor.execute(runnable)
      DueScheduler.Ran
    else
      val onClose = runnable.isInstanceOf[Scheduler.TaskRunOnClose]
      if onClose then runOnClose.add(runnable)
      // Whether this call takes the task: one Pekko wants run on close is taken once, by the timer, a cancel or the close.
      def claimed = !onClose || runOnClose.remove(runnable)
      val due = at(delay.toNanos)(() => if claimed then executor.execute(runnable))
      new Cancellable:
        def cancel(): Boolean = claimed && due.cancel(false)
        def isCancelled: Boolean = due.isCancelled

  /** At a fixed rate: each run is due `interval` after the one before was due, and starts once that
    * one is done, on the executor. A run that throws ends the series, as Pekko's own scheduler does.
    */
  @deprecated("the Scheduler's abstract member; callers use scheduleAtFixedRate", "Pekko 1.0")
  def schedule(initialDelay: FiniteDuration, interval: FiniteDuration, runnable: Runnable)(implicit executor: ExecutionContext): Cancellable =
    if interval.length <= 0 then throw IllegalArgumentException(s"a task repeated every $interval would repeat for ever: give it a positive interval")
    Repeating(runnable, interval.toNanos, executor).start(initialDelay.toNanos.max(0))

  private final class Repeating(runnable: Runnable, interval: Long, executor: ExecutionContext) extends Cancellable, Runnable:
    private val cancelled = AtomicBoolean(false)
    @volatile private var next: ScheduledFuture[?] = null
    private var due = 0L // nanoTime; its runs never overlap
    private val hand: Runnable = () => if !cancelled.get then executor.execute(this)

    def start(delay: Long): this.type =
      due = System.nanoTime() + delay
      next = at(delay)(hand)
      this

    def run(): Unit = if !cancelled.get then
      runnable.run()
      due += interval
      if !cancelled.get then
        try next = at((due - System.nanoTime()).max(0))(hand)
        catch case _: IllegalStateException => () // the system is stopping

    def cancel(): Boolean = cancelled.compareAndSet(false, true) && { next.cancel(false); true }
    def isCancelled: Boolean = cancelled.get

  private def at(nanos: Long)(task: Runnable): ScheduledFuture[?] =
    try timer.schedule(task, nanos, TimeUnit.NANOSECONDS)
    catch case e: RejectedExecutionException => throw refused(e)

  private def refused(cause: Throwable) = IllegalStateException("cannot enqueue after timer shutdown", cause)

  /** Stops the timer, then runs the tasks Pekko asked to have run on close, as Pekko's scheduler does. */
  def close(): Unit =
    timer.shutdownNow()
    runOnClose.forEach { task =>
      if runOnClose.remove(task) then
        try task.run()
        catch case NonFatal(e) => log.error(e, "a task run as the scheduler closed failed")
    }

object DueScheduler:
  /** A task with no delay, handed to its executor at once: too late to cancel, and not cancelled. */
  private val Ran: Cancellable = new Cancellable:
    def cancel(): Boolean = false
    def isCancelled: Boolean = false
