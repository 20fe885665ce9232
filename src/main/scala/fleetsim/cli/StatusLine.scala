package fleetsim.cli

import fleetsim.device.DeviceState
import fleetsim.metrics.{FleetMetrics, ProcessWatch}

import java.io.PrintStream
import java.time.LocalTime
import java.time.format.DateTimeFormatter

/** The once-a-second line: devices per state, replies per second, errors, p99 latency. On a
  * terminal it rewrites itself in place and shows a progress bar while ramping; otherwise it
  * prints plain lines, one per tick, for logs and pipes.
  */
final class StatusLine(metrics: FleetMetrics, process: ProcessWatch, target: Int, tunnels: Boolean, out: PrintStream, terminal: Boolean):
  private val clock = DateTimeFormatter.ofPattern("HH:mm:ss")
  private var lastReplies = 0L
  private var lastErrors = 0L
  private var lastAt = System.nanoTime()

  def tick(): Unit = synchronized {
    val now = System.nanoTime()
    val s = metrics.snapshot()
    process.sample()
    val replies = s.total(k => k.ok + k.forbidden + k.failed)
    val errors = s.total(k => k.forbidden + k.failed)
    val perSecond = (replies - lastReplies) * 1e9 / (now - lastAt).max(1)
    val newErrors = errors - lastErrors
    lastReplies = replies; lastErrors = errors; lastAt = now
    val p99 = s.byKind.values.map(_.recent.p99).maxOption.getOrElse(0.0)
    val states = DeviceState.values.filter(st => s.byState(st) > 0).map(st => s"$st ${s.byState(st)}").mkString(" ")
    val running = s.devices
    val ramp = if terminal && running < target then progress(running) + " " else ""
    val ssh =
      if !tunnels then ""
      else
        val t = s.tunnels
        f" | tunnels ${t.up} up, ${s.byState(DeviceState.Tunneling)} opening, ${t.retunnels} re-tunnels, handshake p99 ${t.recent.p99}%.0f ms"
    val line = f"${LocalTime.now.format(clock)} $ramp$running/$target devices | $states | $perSecond%.0f msg/s | errors +$newErrors ($errors total) | p99 $p99%.1f ms$ssh"
    if terminal then out.print("\r" + line + "\u001b[K") else out.println(line)
    out.flush()
  }

  /** Ends an in-place line so that what follows starts on its own line. */
  def close(): Unit = if terminal then { out.println(); out.flush() }

  private def progress(running: Long): String =
    val width = 20
    val filled = (running * width / target.max(1)).toInt.min(width)
    "[" + "#" * filled + "." * (width - filled) + "]"
