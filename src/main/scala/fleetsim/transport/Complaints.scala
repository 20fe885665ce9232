package fleetsim.transport

import org.slf4j.LoggerFactory

import java.util.concurrent.ConcurrentHashMap
import java.util.concurrent.atomic.AtomicLong

/** Warnings about what a server or a profile got wrong, one line at most each second for each kind
  * of problem: a fleet meets the same broken reply thousands of times a second, and the log must
  * stay readable. Every call is counted in the figures all the same.
  */
object Complaints:
  private val log = LoggerFactory.getLogger("fleetsim.transport")
  private final class Kind:
    @volatile var last = System.nanoTime() - 2_000_000_000L
    val unsaid = AtomicLong()

  private val kinds = ConcurrentHashMap[String, Kind]()

  /** Says `line` unless a line of this kind was said in the last second; then says how many were not. */
  def warn(kind: String, line: => String): Unit =
    val k = kinds.computeIfAbsent(kind, _ => Kind())
    val now = System.nanoTime()
    val last = k.last
    if now - last < 1_000_000_000L || !synchronized { (k.last == last) && { k.last = now; true } } then k.unsaid.incrementAndGet()
    else
      val unsaid = k.unsaid.getAndSet(0)
      log.warn(if unsaid == 0 then line else s"$line ($unsaid more like it in the last second)")
