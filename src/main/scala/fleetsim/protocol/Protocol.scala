package fleetsim.protocol

import com.github.plokhotnyuk.jsoniter_scala.core.*
import com.github.plokhotnyuk.jsoniter_scala.macros.*
import fleetsim.transport.ssh.SshEndpoint

/** Reference controller protocol v1 (docs/controller.md): the JSON bodies both sides exchange.
  *
  * @param sshKey the device's SSH public key (OpenSSH format), sent when it will open a tunnel
  */
final case class JoinRequest(mac: String, serial: String, model: String, firmware: String, sshKey: Option[String] = None)
object JoinRequest:
  given JsonValueCodec[JoinRequest] = JsonCodecMaker.make

final case class JoinReply(heartbeatIntervalS: Int, statsIntervalS: Int, configSeq: Long, ssh: Option[SshEndpoint] = None)
object JoinReply:
  given JsonValueCodec[JoinReply] = JsonCodecMaker.make

final case class Heartbeat(seq: Long, uptimeS: Long, state: String, configSeq: Long)
object Heartbeat:
  given JsonValueCodec[Heartbeat] = JsonCodecMaker.make

/** The heartbeat reply, and the admin API's answer to a config bump: the latest config version. */
final case class HeartbeatReply(configSeq: Long)
object HeartbeatReply:
  given JsonValueCodec[HeartbeatReply] = JsonCodecMaker.make

object Protocol:
  /** Parses a reply body, or None when the peer sent something that is not protocol v1. */
  def parse[A: JsonValueCodec](body: Array[Byte]): Option[A] =
    try Some(readFromArray[A](body))
    catch case _: JsonReaderException => None

/** A protocol v1 call: the unit the reference controller tallies by. */
enum ApiCall(val key: String):
  case Join extends ApiCall("join")
  case Heartbeat extends ApiCall("heartbeat")
  case Stats extends ApiCall("stats")
  case Config extends ApiCall("config")

/** A stats round is one POST per kind. */
enum StatsKind(val key: String):
  case System extends StatsKind("system")
  case Radio extends StatsKind("radio")
  case Clients extends StatsKind("clients")

object StatsKind:
  def fromKey(key: String): Option[StatsKind] = values.find(_.key == key)
