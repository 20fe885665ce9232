package fleetsim.run

import com.typesafe.config.Config
import fleetsim.controller.{Controller, ControllerSettings}
import fleetsim.fleet.DescriptorBudget
import fleetsim.metrics.{MetricsSnapshot, SessionFigures, TunnelSample}
import fleetsim.profile.{ProfileTransport, ProfileTransports}
import fleetsim.report.{SessionsSection, Summary}
import fleetsim.transport.{ConnectionMode, IoThreads, Sessions, Transport}
import org.apache.pekko.actor.typed.ActorSystem

import scala.concurrent.Future

/** How a run's devices carry their calls (docs/adr/0010): plain HTTP, an SSH tunnel each, an MQTT
  * connection each. A kind carries its own settings and supplies everything else a run needs to know
  * of it — its parts, its heap and descriptor budget, its embedded server, its section of the
  * summary, its sample and status line fields — so that nothing else compares transport names.
  *
  * A new kind is one file beside [[HttpKind]], [[SshKind]] and [[MqttKind]] and one line in
  * [[TransportKinds.all]]. What it may also touch: a section of its own in [[fleetsim.report.Summary]]
  * (a field of summary.json, and its line in `Summary.render`), a profile section of its own when
  * its profiles differ from HTTP's ([[fleetsim.profile.ProfileSection]], beside
  * [[fleetsim.profile.MqttSection]]), and the launcher's heap guess (`./fleetsim`, a shell script
  * that reads the command line before any JVM starts).
  */
trait TransportKind extends SessionFigures with SessionsSection:
  /** What the registry knows of this kind before a run's config is read. */
  def entry: TransportKinds.Entry
  /** As the flag, the config and summary.json spell it. */
  final def name: String = entry.name
  override def toString: String = name

  /** The server its devices call, as the run's messages name it. */
  def server: DescriptorBudget.Server = DescriptorBudget.Server.Controller
  /** Its key under `fleetsim` that holds that server's URL: filled in for a cluster's nodes. */
  def serverKey: String = "controller.url"
  /** That server's URL as the user gave it; None: the reference controller embedded in the run. */
  def serverUrl(settings: RunSettings): Option[String] = settings.controllerUrl
  /** Whether that server, named by the user, speaks TLS. */
  def serverTls(settings: RunSettings): Boolean = serverUrl(settings).exists(_.startsWith("https://"))
  /** Starts the embedded reference controller with what this kind's devices call (its SSH server, its broker). */
  def embed(settings: ControllerSettings)(using ActorSystem[?]): Future[Controller] = Controller.start(settings)
  /** The action that drops its devices' sessions on the embedded controller ([[TransportKinds.Entry.sessionDrop]]). */
  final def sessionDrop: Option[fleetsim.control.RunAction] = entry.sessionDrop
  /** Whether a run of this kind can take `action`: any but another kind's session drop. */
  final def takes(action: fleetsim.control.RunAction): Boolean = !action.dropsSessions || sessionDrop.contains(action)
  /** What the devices call on the embedded controller: its HTTP(S) URL, or its broker's. */
  def embeddedUrl(controller: Controller): Option[String] = Some(controller.url)
  /** The URL the devices call: the user's server, else the embedded one's. */
  final def url(settings: RunSettings, controller: Option[Controller]): String =
    serverUrl(settings).orElse(controller.flatMap(embeddedUrl)).getOrElse(
      throw IllegalStateException(s"no ${server.name} for ${name} devices: none named and none embedded"))

  /** What each device's own session is called in a refusal, plural ("SSH tunnels"); None: the
    * devices hold none, and every call goes over the fleet's HTTP connections.
    */
  def sessions: Option[String] = None
  /** HTTP connections the fleet may hold open at once: its joins' and calls'. */
  def connections(settings: RunSettings): Int =
    if settings.connection == ConnectionMode.Shared then settings.http.connectionsFor(settings.fleet.devices) else settings.fleet.devices
  /** Live heap a device holds, by what it keeps open (BENCHMARKS.md, "Heap per device"), in bytes. */
  def heapPerDevice(tls: Boolean, ownConnection: Boolean): Long
  /** What would fail all of its devices alike, checked before any starts; a [[fleetsim.UsageError]] says what. */
  def preflight(): Unit = ()
  /** What a device sends at join so that the controller admits its session (SSH's public key): a
    * profile's `sshKey`.
    */
  def joinKey: Option[String] = None

  /** A process's devices' transports, made once from the run's settings. */
  def parts(made: FleetParts.Making): TransportKind.Parts

  /** The status line's fields of the devices' sessions, from a sample that has them. */
  def statusFields(t: TunnelSample): String = ""

  def sessionSample(s: MetricsSnapshot, rate: (MetricsSnapshot => Long) => Double): Option[TunnelSample] = None
  def withSessions(summary: Summary, metrics: MetricsSnapshot, upAtEnd: Long): Summary = summary

object TransportKind:
  /** What a kind gives a process's devices.
    *
    * @param direct carries the joins and the calls made outside a session
    * @param sessions opens each device's own session; None: the devices hold none
    * @param io the threads the devices run on, beside their sessions' I/O; None: Pekko's default dispatcher
    */
  final case class Parts(direct: Transport, sessions: Option[Sessions] = None, io: Option[IoThreads] = None)

/** The kinds, by name: the one list of them, which the profile loader is given for a profile's `transport`. */
object TransportKinds extends ProfileTransports[TransportKinds.Entry]:
  /** A kind as the registry knows it before a run's config is read: its name, the device profile its
    * devices speak when the run names none, the section its profiles have, and how its settings are read.
    *
    * @param help what `--help` says of it after its name, or ""
    */
  abstract class Entry(val name: String, val defaultProfile: String, val help: String) extends ProfileTransport:
    /** The kind with its settings, read from the run's config; a mistake as IllegalArgumentException. */
    def read(config: Config): TransportKind
    /** Checks this kind's own settings in a run of any kind: `chosen` when the run is of this kind. */
    def check(config: Config, chosen: Boolean): Unit = ()
    /** The action that drops its devices' sessions on the embedded controller (its broker's
      * connections, its SSH server's tunnels); None: they hold none there.
      */
    def sessionDrop: Option[fleetsim.control.RunAction] = None

  val all: Seq[Entry] = Seq(HttpKind, SshKind, MqttKind)

  val names: Seq[String] = all.map(_.name)

  /** The kind a run is when neither the command line nor the profile says. */
  val default: Entry = HttpKind

  def named(name: String): Option[Entry] = all.find(_.name == name)

  /** The kind whose devices hold the sessions `action` drops on the embedded controller. */
  def dropped(action: fleetsim.control.RunAction): Option[Entry] = all.find(_.sessionDrop.contains(action))

  /** "a, b or c". */
  def either(words: Seq[String]): String = if words.size < 2 then words.mkString else words.init.mkString(", ") + " or " + words.last

  val listed: String = either(names)

  /** What the transport flag's help says of the kinds: "http, ssh (a tunnel per device) or ...". */
  def described: String = either(all.map(e => if e.help.isEmpty then e.name else s"${e.name} (${e.help})"))
