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
  /** What a thread carries before the next is used, up to one a core: `calls` a second, or `devices`
    * when how often they call is not known (an interval a reply gives). Each thread wakes for its
    * own timer ticks and reads, and a wake-up costs more than a few calls: two threads for a fleet
    * that one could carry woke twice as often for the same calls, about a fifth more CPU a publish at
    * 1,000 MQTT devices (bench/history/2026-11-23-mqtt-one-event-loop.md) and a third more a call at
    * 100,000 HTTP devices making 10,000 calls a second (2026-12-06-one-loop.md).
    */
  final case class PerLoop(calls: Int, devices: Int)
  /** Calls crowded onto shared connections, many to a write and a read: one loop carried 50,000 a
    * second from 100,000 devices at the CPU a call and lateness of two (2026-12-07-one-loop-carries.md).
    * A device whose rate a reply sets counts as two calls a second, as in [[Owned]].
    */
  val Shared = PerLoop(calls = 50_000, devices = 25_000)
  /** Calls each on its device's own connection (MQTT, HTTP per device or per call), a write and a
    * read each: an MQTT publish costs about five times a shared HTTP call. The figures measured for
    * MQTT, kept for HTTP's own connections, which were not measured on one loop.
    */
  val Owned = PerLoop(calls = 10_000, devices = 5000)

  /** The threads `devices` need on `cores` cores, each device making `callsPerDevice` calls a second
    * once up (None: not known before they join).
    */
  def loopsFor(devices: Int, callsPerDevice: Option[Double], per: PerLoop, cores: Int = Runtime.getRuntime.availableProcessors): Int =
    val wanted = callsPerDevice.fold((devices + per.devices - 1) / per.devices)(rate => math.ceil(devices * rate / per.calls).toInt)
    wanted.max(1).min(cores.max(1))
