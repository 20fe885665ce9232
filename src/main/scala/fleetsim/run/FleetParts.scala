package fleetsim.run

import fleetsim.device.{Device, DeviceDispatcher, Draws, TimingWheel}
import fleetsim.metrics.{FleetMetrics, MeteredSessions, MeteredTransport}
import fleetsim.tls.{CertificateAuthority, FleetTls}
import fleetsim.transport.{ConnectionMode, Dialer, GatedSessions, HeldBack, HttpTransport, IoThreads, NetworkFaults, Sessions, Transport, UrlTransport}
import io.micrometer.core.instrument.MeterRegistry
import org.apache.pekko.Done
import org.apache.pekko.actor.Props
import org.apache.pekko.actor.typed.{ActorSystem, DispatcherSelector}
import org.apache.pekko.http.scaladsl.model.Uri

import scala.concurrent.{ExecutionContext, Future}

/** What one process's devices share, made once from the run's settings: their metrics, the metered
  * transport, their own sessions if their kind has them, and the timing wheel; `device(i)` makes device i.
  * A run in one process makes one; so does each node of a cluster for its share of the fleet.
  */
final class FleetParts private (val metrics: FleetMetrics, http: Transport, val sessions: Option[Sessions], wheel: TimingWheel, shared: Device.Shared,
    val faults: NetworkFaults):
  def device(i: Int): Props = Device.props(i, shared)

  /** After the devices have stopped: closes their sessions, connections and the wheel. */
  def close()(using ExecutionContext): Future[Done] =
    wheel.close()
    for
      _ <- sessions.fold(Future.successful(Done))(_.close())
      _ <- http.close()
    yield Done

object FleetParts:
  /** The I/O threads `devices` run on, talking `scheme`, on `cores` cores: as many as their calls need
    * (up to one a core), an MQTT device's keep-alive pings among them; a loop carries more calls
    * crowded onto shared connections than calls each on a connection of its own. Over MQTT's TLS,
    * whose publish costs twice a plain one and was not measured on one loop, one per 5,000 devices
    * as before (HTTPS devices run on none).
    */
  def ioLoops(settings: RunSettings, scheme: String, devices: Int, cores: Int = Runtime.getRuntime.availableProcessors): Int =
    val pings = settings.profile.mqtt.fold(0.0)(o => if o.keepAlive.toSeconds > 0 then 1.0 / o.keepAlive.toSeconds else 0.0) // 0: none
    val per = if scheme == "http" && settings.connection == ConnectionMode.Shared then IoThreads.Shared else IoThreads.Owned
    IoThreads.loopsFor(devices, settings.profile.callsPerSecond.filter(_ => scheme != "mqtts").map(_ + pings), per, cores)

  /** What a transport kind makes its devices' transports of ([[TransportKind.parts]]): the run's
    * settings, the server's URL, and the fleet's own way to reach a server over HTTP(S).
    *
    * @param url the controller's (or, for MQTT, the broker's) URL
    * @param devices how many of the fleet's devices this process runs
    */
  final class Making private[FleetParts] (val settings: RunSettings, val url: Uri, embeddedCa: Option[CertificateAuthority], val devices: Int,
      metrics: FleetMetrics, holding: Option[() => Boolean], faults: NetworkFaults)(using val system: ActorSystem[?]):
    given ExecutionContext = system.executionContext
    val host: String = url.authority.host.address
    /** The I/O threads the devices run on ([[FleetParts.ioLoops]]). */
    val ioLoops: Int = FleetParts.ioLoops(settings, url.scheme, devices)

    /** HTTP(S) to one server: the controller; for MQTT devices, a server a call names by its URL. */
    def httpTo(scheme: String, host: String, port: Int, clientCa: Option[CertificateAuthority]): HttpTransport =
      val tls = Option.when(scheme == "https") {
        FleetTls(host, port, FleetTls.trust(settings.tls, embeddedCa.map(_.certificate)), FleetTls.certificates(settings.tls, clientCa),
          settings.profile.identityName, settings.tls.protocols)
      }
      HttpTransport(host, port, Dialer(host, port, settings.http, tls, settings.sourceIps), settings.connection, settings.http, devices, ioLoops)

    /** HTTP(S) to the server `url` names: the controller. */
    def controller: HttpTransport =
      httpTo(url.scheme, host, url.effectivePort, embeddedCa.filter(_ => settings.controller.clientCertsRequired))

    /** HTTP(S) to whichever server each call names by its URL (MQTT devices fetching a document a push named). */
    def byUrl: Transport = UrlTransport(httpTo(_, _, _, None), system.dispatchers.lookup(DispatcherSelector.blocking()))

    /** Sessions as the devices see them: metered, through the network's faults, held back on a held node, and `atOnce` opening at a time. */
    def gated(s: Sessions, atOnce: Int): Sessions =
      GatedSessions(MeteredSessions(faults.sessions(holding.fold(s)(HeldBack.sessions(s, _))), metrics), atOnce)

  /** @param url the controller's (or, for MQTT, the broker's) URL
    * @param embeddedCa the embedded controller's certificate authority, when it speaks TLS
    * @param devices how many of the fleet's devices this process runs
    * @param holding on a cluster node: whether its devices are held back ([[HeldBack]])
    */
  def apply(settings: RunSettings, url: Uri, embeddedCa: Option[CertificateAuthority], registry: MeterRegistry, devices: Int,
      holding: Option[() => Boolean] = None)(using system: ActorSystem[?]): FleetParts =
    val metrics = FleetMetrics(settings.profile.kinds, registry)
    val draws = Draws.seeded(settings.seed)
    val faults = NetworkFaults(settings.http.requestTimeout, () => draws.current)
    val made = settings.transport.parts(Making(settings, url, embeddedCa, devices, metrics, holding, faults))
    val http = faults.transport(holding.fold(made.direct)(HeldBack.transport(made.direct, _)))
    // Devices whose transport has I/O threads of their own run, and their wheels tick, on them
    // (MQTT's event loops: bench/history/2026-11-23-mqtt-cpu-event-loops.md; plain HTTP's loops: ADR 0016).
    val wheel = TimingWheel(on = made.io)
    val dispatchers = made.io.fold(IndexedSeq.empty)(DeviceDispatcher.register(system.classicSystem, _))
    new FleetParts(metrics, http, made.sessions, wheel,
      Device.Shared(settings.profile, settings.device, MeteredTransport(http, metrics), made.sessions, metrics, wheel, draws, dispatchers = dispatchers),
      faults)
