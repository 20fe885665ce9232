package fleetsim.profile

import com.typesafe.config.{Config, ConfigObject, ConfigValue}
import fleetsim.transport.MessageKind
import fleetsim.transport.mqtt.MqttOptions

/** A transport's own part of a device profile: the top-level keys only its profiles may have, what
  * its calls are (a request to a path, a publish to a topic) and may have, the identity fields it
  * adds, and what it compiles for its devices. The loader reads the rest and asks the profile's
  * section for these. A kind supplies its section ([[ProfileTransport.profileSection]]). The
  * sections, [[HttpSection]] and [[MqttSection]], live here rather than beside their transports:
  * they compile with the loader's own parts, and this package imports what transport/mqtt and
  * transport/ssh define for the devices.
  */
trait ProfileSection:
  /** The top-level keys only its profiles may have. */
  private[profile] def keys: Set[String]

  /** A profile of it, as the refusal of a key it may not have says: "a device profile (...)". */
  private[profile] def described: String

  /** How a refusal of a run over another section speaks of a profile of it: "describes HTTP calls". */
  private[profile] def profileIs: String

  /** What a run over `transport`, a transport of this section, needs of a profile, as its refusal of another section's says. */
  private[profile] def needs(transport: String): String

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

/** A transport as a device profile names it (`transport = mqtt`): what the loader needs of a kind
  * ([[fleetsim.run.TransportKinds.Entry]]).
  */
trait ProfileTransport:
  /** As a profile's `transport` and the command line name it. */
  def name: String
  /** The built-in profile its devices speak when the run names none. */
  def defaultProfile: String
  /** The part of a profile only profiles for it have, and how their calls compile. */
  def profileSection: ProfileSection

/** The transports a profile may name: the run's kinds ([[fleetsim.run.TransportKinds]]), as the loader is given them. */
trait ProfileTransports[+T <: ProfileTransport]:
  /** The transport a profile's `transport` names; None: none is named so. */
  def named(name: String): Option[T]
  /** Their names, as a mistake lists them: "http, ssh or mqtt". */
  def listed: String

object ProfileTransports:
  /** No transport: a profile loaded so must name none, and its devices make HTTP calls. */
  val Empty: ProfileTransports[Nothing] = new ProfileTransports[Nothing]:
    def named(name: String): Option[Nothing] = None
    def listed: String = "left out"

/** What a transport's section gives the devices.
  *
  * @param login the name a device logs in with (SSH) or connects as (MQTT), and names its certificate by
  * @param ssh the kept values that say where a device's tunnel goes (host, port); None: the run's own setting
  * @param mqtt an MQTT device's session; None for HTTP devices
  */
private[profile] final case class TransportParts(login: Template[CallScope], ssh: Option[(Slot, Slot)], mqtt: Option[MqttOptions])

/** An identity field a section adds, rendered from a template of the profile's own fields. */
private[profile] final case class IdentityTemplate(name: String, text: String, at: ConfigValue, what: String)
