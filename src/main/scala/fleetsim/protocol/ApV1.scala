package fleetsim.protocol

import com.github.plokhotnyuk.jsoniter_scala.core.{JsonValueCodec, writeToArray}
import fleetsim.device.*
import fleetsim.transport.{MessageKind, Reply, Request, SshEndpoint}

import java.nio.charset.StandardCharsets.{US_ASCII, UTF_8}

/** Protocol v1 as a device profile: join, a heartbeat and a round of three stats, and a config
  * download whenever a reply announces a newer config than the device applied.
  *
  * @param identity who device i is
  * @param sshKey the fleet's SSH public key, sent at join when devices tunnel
  */
final class ApV1(identity: Int => Identity, sshKey: Option[String]) extends DeviceProfile:
  import ApV1.*

  val name = "ap-v1"
  private val Seq(joinKind, heartbeatKind, statsKind, configKind) =
    ApiCall.values.toSeq.map(c => MessageKind(c.key, c.ordinal, c == ApiCall.Heartbeat || c == ApiCall.Stats))
  val kinds: IndexedSeq[MessageKind] = IndexedSeq(joinKind, heartbeatKind, statsKind, configKind)

  // The device's registers: its schedule for the two messages, then what the profile keeps.
  private val base = Registers.profileBase(2)
  private val HeartbeatS = base
  private val StatsS = base + 1
  private val Announced = base + 2 // the newest config the controller announced
  private val Applied = base + 3 // the config the device applied
  private val HeartbeatSeq = base + 4
  private val SshPort = base + 5
  val registers: Int = base + 6
  // Only devices that tunnel keep the SSH host the join named.
  val texts: Int = if sshKey.isDefined then 1 else 0

  val join: Call = new Call:
    val kind = joinKind
    def render(device: DeviceScope): Request =
      val id = identity(device.number)
      // Rendered per join, not kept: joins are rare, and a million devices would keep 150 MB of them.
      json(kind, "/api/v1/join", JoinRequest(id.mac, id.serial, id.model, id.firmware, sshKey))
    def read(reply: Reply, device: DeviceScope): Outcome = reply match
      case ok: Reply.Response if ok.ok =>
        Protocol.parse[JoinReply](ok.body) match
          case Some(join) =>
            val r = device.registers
            r(HeartbeatS) = join.heartbeatIntervalS
            r(StatsS) = join.statsIntervalS
            r(Announced) = join.configSeq
            if device.texts != null then
              device.texts(0) = join.ssh.map(_.host).orNull
              r(SshPort) = join.ssh.fold(0)(_.port)
            Outcome.Ok
          case None => Outcome.Failed
      case Reply.Response(403, _, _) => Outcome.NotAdmitted
      case other => outcome(other)

  private val heartbeat: Call = new Call:
    val kind = heartbeatKind
    def render(device: DeviceScope): Request =
      val r = device.registers
      r(HeartbeatSeq) += 1
      json(kind, s"/api/v1/devices/${mac(device)}/heartbeat", Heartbeat(r(HeartbeatSeq), device.uptimeS, device.state.toString, r(Applied)))
    def read(reply: Reply, device: DeviceScope): Outcome = reply match
      case ok: Reply.Response if ok.ok =>
        val r = device.registers
        Protocol.parse[HeartbeatReply](ok.body).foreach(reply => r(Announced) = r(Announced).max(reply.configSeq))
        Outcome.Ok
      case other => outcome(other)

  private val stats: IndexedSeq[Call] = StatsKind.values.toIndexedSeq.map { stats =>
    new Call:
      val kind = statsKind
      def render(device: DeviceScope): Request =
        val address = mac(device)
        Request(kind, "POST", Protocol.statsPath(address, stats), JsonHeader, statsBody(address, stats, device))
      def read(reply: Reply, device: DeviceScope): Outcome = outcome(reply)
  }

  private val download: Call = new Call:
    val kind = configKind
    def render(device: DeviceScope): Request = Request(kind, "GET", Protocol.configPath(mac(device)), Array.emptyByteArray, Array.emptyByteArray)
    def read(reply: Reply, device: DeviceScope): Outcome = reply match
      case ok: Reply.Response if ok.ok =>
        // Unreadable, it stays unapplied: the next heartbeat reply announces it again.
        Protocol.parse[ConfigHeader](ok.body) match
          case Some(config) =>
            device.registers(Applied) = config.configSeq
            Outcome.Ok
          case None => Outcome.Failed
      case other => outcome(other)

  val messages: IndexedSeq[Periodic] = IndexedSeq(
    Periodic(heartbeatKind, IndexedSeq(heartbeat), d => d.registers(HeartbeatS) * 1_000_000_000L, jitter = None, maxFailures = None),
    Periodic(statsKind, stats, d => d.registers(StatsS) * 1_000_000_000L, jitter = None, maxFailures = Some(0)))

  val triggers: IndexedSeq[Trigger] =
    IndexedSeq(Trigger(IndexedSeq(download), d => d.registers(Announced) > d.registers(Applied), _ => ()))

  def login(device: DeviceScope): String = mac(device)

  def sshEndpoint(device: DeviceScope): Option[SshEndpoint] =
    Option(device.texts).flatMap(t => Option(t(0))).map(SshEndpoint(_, device.registers(SshPort).toInt))

  def forget(device: DeviceScope): Unit = device.registers(Applied) = 0

  private def mac(device: DeviceScope): String = identity(device.number).mac

  private def statsBody(mac: String, kind: StatsKind, device: DeviceScope): Array[Byte] =
    val random = device.random
    val figures = kind match
      case StatsKind.System => s""""cpuPct":${random.nextInt(100)},"memFreeKb":${random.nextInt(1 << 20)}"""
      case StatsKind.Radio => s""""channel":${1 + random.nextInt(11)},"noiseDbm":${-95 + random.nextInt(10)}"""
      case StatsKind.Clients => s""""clients":${random.nextInt(64)}"""
    s"""{"mac":"$mac","uptimeS":${device.uptimeS},$figures}""".getBytes(UTF_8)

object ApV1:
  private val JsonHeader = "Content-Type: application/json\r\n".getBytes(US_ASCII)

  private def json[A: JsonValueCodec](kind: MessageKind, path: String, body: A): Request =
    Request(kind, "POST", path, JsonHeader, writeToArray(body))

  /** What a status other than the call's own success means: the same for every call of protocol v1. */
  private def outcome(reply: Reply): Outcome = reply match
    case ok: Reply.Response if ok.ok => Outcome.Ok
    case Reply.Response(403, _, _) => Outcome.Rejoin
    case _ => Outcome.Failed
