package fleetsim.protocol

import com.github.plokhotnyuk.jsoniter_scala.core.*
import com.github.plokhotnyuk.jsoniter_scala.macros.*

// Reference controller protocol v1 (see README.md): the JSON bodies both sides exchange.

/** Who a device is: what it says at join. */
final case class Identity(mac: String, serial: String, model: String, firmware: String)

/** @param sshKey the device's SSH public key (OpenSSH format), sent when it will open a tunnel */
final case class JoinRequest(mac: String, serial: String, model: String, firmware: String, sshKey: Option[String] = None)
object JoinRequest:
  given JsonValueCodec[JoinRequest] = JsonCodecMaker.make

final case class SshEndpoint(host: String, port: Int)

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

/** The part of a config document a device reads; the rest is payload. */
final case class ConfigHeader(configSeq: Long)
object ConfigHeader:
  given JsonValueCodec[ConfigHeader] = JsonCodecMaker.make

object Protocol:
  val Prefix = "/api/v1"
  def joinPath: String = s"$Prefix/join"
  def heartbeatPath(mac: String): String = s"$Prefix/devices/$mac/heartbeat"
  def statsPath(mac: String, kind: StatsKind): String = s"$Prefix/devices/$mac/stats/${kind.key}"
  def configPath(mac: String): String = s"$Prefix/devices/$mac/config"

  /** Parses a reply body, or None when the peer sent something that is not protocol v1. */
  def parse[A: JsonValueCodec](body: Array[Byte]): Option[A] =
    try Some(readFromArray[A](body))
    catch case _: JsonReaderException => None

/** What a message is for: the unit every count, latency and controller tally is kept by. */
enum MessageKind(val key: String):
  case Join extends MessageKind("join")
  case Heartbeat extends MessageKind("heartbeat")
  case Stats extends MessageKind("stats")
  case Config extends MessageKind("config")

/** A stats round is one POST per kind. */
enum StatsKind(val key: String):
  case System extends StatsKind("system")
  case Radio extends StatsKind("radio")
  case Clients extends StatsKind("clients")

object StatsKind:
  def fromKey(key: String): Option[StatsKind] = values.find(_.key == key)
