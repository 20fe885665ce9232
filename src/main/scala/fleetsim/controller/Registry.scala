package fleetsim.controller

import fleetsim.protocol.ApiCall
import fleetsim.metrics.ControllerCounts

import org.apache.sshd.common.config.keys.KeyUtils

import java.security.PublicKey
import java.util.concurrent.ConcurrentHashMap
import java.util.concurrent.atomic.{AtomicLong, LongAdder}
import scala.collection.immutable.ListMap
import scala.jdk.CollectionConverters.*

/** What the reference controller knows of one joined device. Written by request threads, read by
  * admin calls: fields are volatile, and a stale read is harmless. Kept small — a controller holds
  * millions — so the few distinct models, firmwares and states are shared strings, not copies.
  */
final class DeviceRecord(val serial: String, model0: String, firmware0: String):
  val model: String = model0.intern()
  val firmware: String = firmware0.intern()
  @volatile private var reportedState: String = ""
  @volatile var configSeq: Long = 0
  /** At its latest join or heartbeat. */
  @volatile var lastSeenMillis: Long = 0
  /** The SSH key the device presented at its latest join, if any. */
  @volatile var sshKey: Option[PublicKey] = None
  /** The address its latest call came from ("" through a tunnel); the few distinct ones shared. */
  @volatile var address: String = ""
  /** Joins so far; written under the registry's lock for this device. */
  @volatile var joins: Int = 0
  /** The uptime in its latest heartbeat since it joined (-1: none yet). */
  @volatile var uptimeS: Long = -1

  def state: String = reportedState
  def state_=(s: String): Unit = reportedState = s.intern()

/** The controller's in-memory device registry and its tallies. Shared by request threads without
  * an actor in between, so it is never a bottleneck for the fleet it serves.
  */
final class Registry:
  private val devices = ConcurrentHashMap[String, DeviceRecord]()
  private val forbidden = ConcurrentHashMap.newKeySet[String]()
  private val seq = AtomicLong(1)
  // By message kind: protocol v1's calls, and the kinds of the other dialects' profiles.
  private val received = Tally()
  private val refused = Tally()
  private val injectedErrors = Tally()
  private val tunnelled = Tally()
  private val forwardsRefused = LongAdder()
  private val addressChanges = LongAdder()
  private val connections = LongAdder()
  private val duplicates = LongAdder()
  private val clientSubjects = ConcurrentHashMap.newKeySet[String]()

  def configSeq: Long = seq.get
  def bumpConfig(): Long = seq.incrementAndGet()

  def forbid(mac: String): Unit =
    forbidden.add(mac)
    devices.remove(mac)
  def allow(mac: String): Unit = forbidden.remove(mac)
  def isForbidden(mac: String): Boolean = forbidden.contains(mac)

  def join(mac: String, serial: String, model: String, firmware: String, sshKey: Option[PublicKey], address: String): Unit =
    devices.compute(mac, (_, known) =>
      val record = Option(known).getOrElse(DeviceRecord(serial, model, firmware))
      seenFrom(record, address)
      record.sshKey = sshKey
      record.joins += 1
      record.uptimeS = -1 // a new session, maybe a rebooted device
      record.lastSeenMillis = System.currentTimeMillis()
      record)

  /** SSH logins: only a device that joined, with the key it presented. */
  def admits(mac: String, key: PublicKey): Boolean =
    find(mac).flatMap(_.sshKey).exists(KeyUtils.compareKeys(_, key)) && !isForbidden(mac)

  /** A device that has not joined (or was forbidden, or the controller restarted) must join again. */
  def find(mac: String): Option[DeviceRecord] = Option(devices.get(mac))

  def devicesView: Iterator[(String, DeviceRecord)] = devices.entrySet.iterator.asScala.map(e => e.getKey -> e.getValue)
  def registered: Int = devices.size
  def forbiddenCount: Int = forbidden.size

  def countReceived(kind: String, throughTunnel: Boolean = false): Unit =
    received.add(kind)
    if throughTunnel then tunnelled.add(kind)
  /** Notes the address a device's call came from, counting a change: a real device keeps its address. */
  def seenFrom(device: DeviceRecord, address: String): Unit =
    if address != device.address then
      if device.address.nonEmpty then addressChanges.increment()
      device.address = address.intern()

  /** A heartbeat's uptime. Within one session a device's uptime only grows: one that goes back by
    * more than [[Registry.UptimeSlackS]] comes from a second device with the same MAC, booted later
    * (one block of devices running on two cluster nodes, say). Clock-free, so slow replies and
    * queues do not make duplicates. The first few are logged, with the MAC, for whoever has to find
    * the second device.
    */
  def sawUptime(mac: String, device: DeviceRecord, uptimeS: Long): Unit =
    if device.uptimeS - uptimeS > Registry.UptimeSlackS then
      duplicates.increment()
      if duplicates.sum <= Registry.DuplicatesLogged then
        Registry.log.warn(s"device $mac: a heartbeat with uptime $uptimeS s after one with ${device.uptimeS} s, from ${device.address}: " +
          s"a second device with this MAC? (the first ${Registry.DuplicatesLogged} such are logged)")
    device.uptimeS = uptimeS

  def countConnection(): Unit = connections.increment()
  /** A TLS client's certificate subject, seen on one of its calls. */
  def sawClient(subject: String): Unit = clientSubjects.add(subject)

  def countForwardRefused(): Unit = forwardsRefused.increment()
  def countRefused(kind: String): Unit = refused.add(kind)
  def countInjectedError(kind: String): Unit = injectedErrors.add(kind)

  def counts: ControllerCounts =
    ControllerCounts(registered, forbiddenCount, configSeq, received.sums, tunnelled.sums, refused.sums, injectedErrors.sums,
      forwardsRefused.sum, addressChanges.sum, connections.sum, clientSubjects.size, duplicates = duplicates.sum)

object Registry:
  /** How far back one device's uptime may seem to go: two of its heartbeats overtaking each other on
    * their way. Two devices sharing a MAC that booted closer than this go unseen.
    */
  val UptimeSlackS = 10
  private val DuplicatesLogged = 10
  private val log = org.slf4j.LoggerFactory.getLogger(classOf[Registry])

/** Counts by name; protocol v1's kinds always listed, in their order, so a zero shows. */
private final class Tally:
  private val counts = ConcurrentHashMap[String, LongAdder]()
  ApiCall.values.foreach(k => counts.put(k.key, LongAdder()))
  def add(kind: String): Unit = counts.computeIfAbsent(kind, _ => LongAdder()).increment()
  def sums: Map[String, Long] =
    val v1 = ApiCall.values.map(_.key)
    ListMap.from((v1 ++ counts.keySet.asScala.toSeq.filterNot(v1.contains).sorted).map(k => k -> counts.get(k).sum))

/** Fault switches, flipped at run time through the admin API: added latency, injected 500s, and
  * 429s that ask the device to come back after `retryAfterS`.
  */
final case class Faults(errorRate: Double = 0, latencyMs: Long = 0, throttleRate: Double = 0, retryAfterS: Int = 1):
  require(errorRate >= 0 && errorRate <= 1, "errorRate must be between 0 and 1")
  require(throttleRate >= 0 && errorRate + throttleRate <= 1, "throttleRate must be between 0 and 1 - errorRate")
  require(latencyMs >= 0, "latencyMs must not be negative")
  require(retryAfterS >= 0, "retryAfterS must not be negative")
