package fleetsim.transport

import scala.concurrent.duration.FiniteDuration

/** The threads a transport does its I/O on, offered to its devices. Device i's connection is on
  * thread `of(i)`; when its actor runs there and its wake-ups fire there, a send is written by the
  * thread that made it and its reply read by the same, and no other thread is woken for either
  * (bench/history/2026-11-23-mqtt-cpu-event-loops.md). Their work must never block.
  */
trait IoThreads:
  def size: Int
  /** The thread device `device`'s connection is on. */
  def of(device: Int): Int = device % size
  /** The thread calling this, or -1 when it is none of them. */
  def current: Int
  /** Runs `task` on thread `thread`: without waking it when it is the caller. */
  def execute(thread: Int, task: Runnable): Unit
  /** Runs `task` once on thread `thread`, `delay` from now, unless cancelled first. */
  def after(thread: Int, delay: FiniteDuration)(task: () => Unit): java.util.concurrent.Future[?]

object IoThreads:
  /** Calls a second a thread carries before the next is used, up to one a core. Each thread wakes for
    * its own timer ticks and reads, and a wake-up costs more than the calls it carries: two threads
    * for a fleet that one could carry woke twice as often for the same calls, about a fifth more CPU
    * a publish at 1,000 MQTT devices (bench/history/2026-11-23-mqtt-one-event-loop.md) and a third
    * more a call at 100,000 HTTP devices making 10,000 calls a second (2026-12-06-one-loop.md).
    */
  val CallsPerLoop = 10_000
  /** Devices a thread carries when how often they call is not known (an interval a reply gives). */
  val DevicesPerLoop = 5000

  /** The threads `devices` need on `cores` cores, each device making `callsPerDevice` calls a second
    * once up (None: not known before they join).
    */
  def loopsFor(devices: Int, callsPerDevice: Option[Double], cores: Int = Runtime.getRuntime.availableProcessors): Int =
    val wanted = callsPerDevice.fold((devices + DevicesPerLoop - 1) / DevicesPerLoop)(rate => math.ceil(devices * rate / CallsPerLoop).toInt)
    wanted.max(1).min(cores.max(1))
