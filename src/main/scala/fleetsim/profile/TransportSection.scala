package fleetsim.profile

import com.typesafe.config.{Config, ConfigValue}
import fleetsim.transport.mqtt.MqttOptions

/** A transport's own part of a device profile: the top-level keys only its profiles may have, the
  * identity fields it adds, and what it compiles for its devices. The loader reads the rest and asks
  * the section of the profile's transport for these; each section is to move beside its transport.
  */
private[profile] trait TransportSection:
  /** The top-level keys only this transport's profiles may have. */
  def keys: Set[String]

  /** Identity fields its devices have besides the profile's, each a template of those (an MQTT device's clientId). */
  def identityTemplates(root: Config): Seq[IdentityTemplate] = Nil

  /** Checks the keys of its blocks before any call is compiled, so that a mistake there is said first. */
  def checkKeys(root: Config): Unit = ()

  /** What its devices get of the profile, once its calls are compiled. */
  def compile(root: Config, identity: Identity, kept: KeptValues, calls: CallCompiler): TransportParts

private[profile] object TransportSection:
  /** The section of a profile for `transport`: MQTT's, else SSH's (any HTTP profile's devices may tunnel). */
  def of(transport: Option[String]): TransportSection = if transport.contains("mqtt") then MqttSection else SshSection

/** What a transport's section gives the devices.
  *
  * @param login the name a device logs in with (SSH) or connects as (MQTT), and names its certificate by
  * @param ssh the kept values that say where a device's tunnel goes (host, port); None: the run's own setting
  * @param mqtt an MQTT device's session; None for HTTP devices
  */
private[profile] final case class TransportParts(login: Template[CallScope], ssh: Option[(Slot, Slot)], mqtt: Option[MqttOptions])

/** An identity field a section adds, rendered from a template of the profile's own fields. */
private[profile] final case class IdentityTemplate(name: String, text: String, at: ConfigValue, what: String)
