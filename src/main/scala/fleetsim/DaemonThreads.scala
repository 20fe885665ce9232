package fleetsim

import java.util.concurrent.ThreadFactory
import java.util.concurrent.atomic.AtomicInteger

/** Threads for fleetsim's own fixed pools, named after them and never holding the JVM up at exit. */
object DaemonThreads:
  def apply(name: String): ThreadFactory =
    val count = AtomicInteger()
    r =>
      val t = Thread(r, s"$name-${count.incrementAndGet()}")
      t.setDaemon(true)
      t
