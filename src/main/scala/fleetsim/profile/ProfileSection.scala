package fleetsim.profile

import com.typesafe.config.{Config, ConfigObject, ConfigValue}
import fleetsim.transport.MessageKind
import fleetsim.transport.mqtt.MqttOptions

/** A transport's own part of a device profile: the top-level keys only its profiles may have, what
  * its calls are (a request to a path, a publish to a topic) and may have, the identity fields it
  * adds, and what it compiles for its devices. The loader reads the rest and asks the profile's
  * section for these. The sections, [[HttpSection]] and [[MqttSection]], live here rather than
  * beside their transports: they compile with the loader's own parts, and this package imports what
  * transport/mqtt and transport/ssh define for the devices.
  */
trait ProfileSection:
  /** The top-level keys only its profiles may have. */
  private[profile] def keys: Set[String]

  /** A profile of it, as the refusal of a key it may not have says: "a device profile (...)". */
  private[profile] def described: String

  /** The keys that say where a call goes and how, besides what every call to a path or url may have. */
  private[profile] def targetKeys: Set[String]

  /** The keys of a call's body, at most one a call. */
  private[profile] def bodyKeys: Seq[String]

  /** Identity fields its devices have besides the profile's, each a template of those (an MQTT device's clientId). */
  private[profile] def identityTemplates(root: Config): Seq[IdentityTemplate] = Nil

  /** Checks the keys of its blocks before any call is compiled, so that a mistake there is said first. */
  private[profile] def checkKeys(root: Config): Unit = ()

  /** The call a block describes, compiled by `calls` ([[CallCompiler.call]] says what each parameter is). */
  private[profile] def call(calls: CallCompiler, kept: KeptValues, block: ConfigObject, kindOf: ConfigValue => MessageKind, what: String,
      atJoin: Boolean, message: Int, notAdmitted: Set[Int]): TemplateCall

  /** What its devices get of the profile, once its calls are compiled. */
  private[profile] def compile(root: Config, identity: Identity, kept: KeptValues, calls: CallCompiler): TransportParts

object ProfileSection:
  /** The section of a profile for `transport`: MQTT's, else HTTP's (any HTTP profile's devices may tunnel). */
  def of(transport: Option[String]): ProfileSection = if transport.contains("mqtt") then MqttSection else HttpSection

/** What a transport's section gives the devices.
  *
  * @param login the name a device logs in with (SSH) or connects as (MQTT), and names its certificate by
  * @param ssh the kept values that say where a device's tunnel goes (host, port); None: the run's own setting
  * @param mqtt an MQTT device's session; None for HTTP devices
  */
private[profile] final case class TransportParts(login: Template[CallScope], ssh: Option[(Slot, Slot)], mqtt: Option[MqttOptions])

/** An identity field a section adds, rendered from a template of the profile's own fields. */
private[profile] final case class IdentityTemplate(name: String, text: String, at: ConfigValue, what: String)
