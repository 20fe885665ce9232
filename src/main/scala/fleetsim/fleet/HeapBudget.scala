package fleetsim.fleet

/** Heap a fleet needs, checked against what the JVM may use before any device starts: a fleet that
  * cannot fit would otherwise die of OutOfMemoryError halfway up its ramp.
  */
object HeapBudget:
  /** For the JVM itself, the controller's and the collector's fixed share, as the launcher gives it. */
  val Base: Long = 256L << 20
  /** The least a fleet runs in besides its devices (ScaleSpec runs 200 devices in 64 MiB). */
  private val Floor: Long = 32L << 20

  /** Live heap a device holds, by what it keeps open (BENCHMARKS.md, "Heap per device"): on shared
    * plain connections under 1 KB; a connection of its own costs it the stream stages, and with TLS
    * the engine's buffers; an SSH session or an MQTT client more.
    */
  def perDevice(transport: String, tls: Boolean, ownConnection: Boolean): Long = transport match
    case "ssh" => 100_000
    case "mqtt" => if tls then 40_000 else 12_000 // measured 9-10 KB at 10,000-19,000; TLS 57 KB at 1,000, fixed costs included
    case _ if !ownConnection => 1_000
    case _ => if tls then 130_000 else 20_000

  /** Refuses a fleet whose live heap alone would not fit, and names the heap it should have: its
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
