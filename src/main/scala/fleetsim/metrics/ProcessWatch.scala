package fleetsim.metrics

import java.lang.management.ManagementFactory
import java.nio.file.{Files, Path}

/** The simulator process itself: threads and heap, sampled by the run's once-a-second tick (through
  * its [[Sampler]]) and once more for the summary.
  */
final class ProcessWatch:
  private val threads = ManagementFactory.getThreadMXBean
  private val memory = ManagementFactory.getMemoryMXBean
  @volatile private var heapPeak = 0L

  /** Takes a heap sample; the peak holds only what these calls saw, so they come every tick. */
  def sample(): ProcessFigures =
    val heap = memory.getHeapMemoryUsage.getUsed
    if heap > heapPeak then heapPeak = heap
    ProcessFigures(threads.getThreadCount, threads.getPeakThreadCount, heap, heapPeak)

final case class ProcessFigures(threads: Int, threadsPeak: Int, heapUsedBytes: Long, heapUsedPeakBytes: Long)

object ProcessWatch:
  /** The process's open-file limit, as `ulimit -n` shows it (None where the JVM cannot tell). */
  def openFileLimit: Option[Long] = ManagementFactory.getOperatingSystemMXBean match
    case unix: com.sun.management.UnixOperatingSystemMXBean => Some(unix.getMaxFileDescriptorCount)
    case _ => None

  /** Open files now; None where the JVM cannot tell, or when there is no descriptor left to count
    * them with (the JDK then throws InternalError, which Pekko would take for a fatal error).
    *
    * Linux 6.2 and later give the count as the size of /proc/self/fd. The JDK lists that folder
    * instead, an entry a descriptor: at 10,000 connections, 8 ms of CPU each second
    * (bench/history/2026-11-23-mqtt-vs-peer-issue-sizes.md).
    */
  def openFiles: Option[Long] =
    val size = try Files.size(OwnDescriptors) catch case _: java.io.IOException => 0L
    if size > 0 then Some(size)
    else ManagementFactory.getOperatingSystemMXBean match
      case unix: com.sun.management.UnixOperatingSystemMXBean =>
        try Some(unix.getOpenFileDescriptorCount) catch case _: InternalError => None
      case _ => None

  private val OwnDescriptors = Path.of("/proc/self/fd")

  /** This process's recent CPU use, in percent of the whole machine (all cores = 100). */
  def cpuPercent: Double = ManagementFactory.getOperatingSystemMXBean match
    case os: com.sun.management.OperatingSystemMXBean => (os.getProcessCpuLoad.max(0) * 1000).round / 10.0
    case _ => 0
