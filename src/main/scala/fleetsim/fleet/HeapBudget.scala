package fleetsim.fleet

/** Heap a fleet needs, checked against what the JVM may use before any device starts: a fleet that
  * cannot fit would otherwise die of OutOfMemoryError halfway up its ramp.
  */
object HeapBudget:
  /** For the JVM itself, the controller's and the collector's fixed share, as the launcher gives it. */
  val Base: Long = 256L << 20
  /** The least a fleet runs in besides its devices (ScaleSpec runs 200 devices in 64 MiB). */
  private val Floor: Long = 32L << 20

  /** Refuses a fleet whose live heap alone would not fit (a device's: its transport kind's
    * [[fleetsim.run.TransportKind.heapPerDevice]]), and names the heap it should have: its
    * live heap doubled, so that the collector has room to work, as the launcher picks it.
    *
    * @param maxHeap what the JVM may use (Runtime.maxMemory)
    */
  def check(devices: Int, perDevice: Long, maxHeap: Long): Either[String, Long] =
    val live = devices.toLong * perDevice
    val needed = Base + 2 * live
    if Floor + live <= maxHeap then Right(needed)
    else
      val mb = (needed >> 20) + 1
      Left(s"this fleet needs about $mb MiB of heap ($devices devices x $perDevice bytes, doubled for the collector, + ${Base >> 20} MiB) " +
        s"but this JVM may use only ${maxHeap >> 20} MiB: set JAVA_OPTS=-Xmx${mb}m (the launcher then leaves the heap to you), or run fewer devices a process")
