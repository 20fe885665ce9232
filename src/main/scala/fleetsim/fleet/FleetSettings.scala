package fleetsim.fleet

import com.typesafe.config.Config

import fleetsim.finiteDuration
import scala.concurrent.duration.*

/** What fleet to run: how many devices, how fast they start, for how long, and their MACs (the rest
  * of who they are is the device profile's).
  *
  * @param duration None runs until stopped
  * @param maxOpenFiles a budget of open files lower than the process's limit, None for that limit ([[DescriptorBudget.limit]])
  */
final case class FleetSettings(
    devices: Int,
    rampRate: Double,
    duration: Option[FiniteDuration],
    macBase: Long,
    maxOpenFiles: Option[Long] = None):
  require(devices >= 1, s"fleetsim.fleet.devices must be at least 1 (got $devices)")
  require(maxOpenFiles.forall(_ > DescriptorBudget.Base),
    s"fleetsim.fleet.max-open-files must be auto or more than the ${DescriptorBudget.Base} the JVM holds itself (got ${maxOpenFiles.getOrElse(0)})")
  require(rampRate > 0, s"fleetsim.fleet.ramp-rate must be positive (got $rampRate)")
  require(macBase + devices <= FleetSettings.MaxMac, "fleetsim.fleet.mac-base plus the number of devices runs past ff:ff:ff:ff:ff:ff")

  /** Device i's MAC: the base plus i. Derived whenever it is needed rather than kept, so quick to make. */
  def mac(i: Int): String = FleetSettings.formatMac(macBase + i)

  /** Device i's MAC appended to `out`: a profile renders it into every call, so without a String each time. */
  def appendMac(i: Int, out: java.lang.StringBuilder): Unit = FleetSettings.appendMac(macBase + i, out)

object FleetSettings:
  private val MaxMac = 0xffffffffffffL

  def apply(config: Config): FleetSettings =
    val c = config.getConfig("fleetsim.fleet")
    val duration = c.finiteDuration("duration")
    require(duration >= Duration.Zero, "fleetsim.fleet.duration must not be negative")
    FleetSettings(
      devices = c.getInt("devices"),
      rampRate = c.getDouble("ramp-rate"),
      duration = Option.when(duration > Duration.Zero)(duration),
      macBase = parseMac(c.getString("mac-base")),
      maxOpenFiles = if c.getString("max-open-files") == "auto" then None else Some(c.getLong("max-open-files")))

  def parseMac(text: String): Long =
    val parts = text.split(':')
    require(
      parts.length == 6 && parts.forall(_.matches("[0-9a-fA-F]{2}")),
      s"fleetsim.fleet.mac-base must look like 02:00:00:00:00:00 (got '$text')")
    parts.foldLeft(0L)((acc, part) => (acc << 8) | Integer.parseInt(part, 16))

  def formatMac(mac: Long): String =
    val text = java.lang.StringBuilder(17)
    appendMac(mac, text)
    text.toString

  /** 02:00:00:00:00:ff, lower case. */
  def appendMac(mac: Long, out: java.lang.StringBuilder): Unit =
    var i = 0
    while i < 6 do
      val byte = (mac >> (40 - 8 * i)).toInt & 0xff
      if i > 0 then out.append(':')
      out.append(Character.forDigit(byte >> 4, 16)).append(Character.forDigit(byte & 0xf, 16))
      i += 1
