package fleetsim.cli

import fleetsim.controller.Controller
import fleetsim.device.{Device, TimingWheel}
import fleetsim.fleet.Fleet
import fleetsim.metrics.*
import fleetsim.report.{Report, RunInfo, Summary, Timeseries}
import fleetsim.tls.{FleetTls, MqttTls}
import fleetsim.transport.mqtt.MqttSessions
import fleetsim.transport.ssh.SshTunnels
import fleetsim.transport.{Dialer, HttpTransport, Transport, Tunnels}
import fleetsim.web.Dashboard
import org.apache.pekko.Done
import org.apache.pekko.actor.Cancellable
import org.apache.pekko.actor.typed.scaladsl.AskPattern.*
import org.apache.pekko.actor.typed.{ActorRef, ActorSystem, DispatcherSelector, Props, SpawnProtocol}
import org.apache.pekko.http.scaladsl.model.Uri
import org.apache.pekko.pattern.after
import org.apache.pekko.util.Timeout
import org.apache.sshd.common.util.net.SshdSocketAddress

import java.nio.file.Files
import java.time.Instant
import java.util.concurrent.ThreadLocalRandom
import java.util.random.RandomGenerator
import scala.concurrent.duration.*
import scala.concurrent.{ExecutionContext, Future}

/** One run wired together: the embedded controller (unless pointed elsewhere), the shared metered
  * transport and tunnels, the fleet, a sample every second (to the time-series file, the dashboard
  * and whoever else listens), and summary.json and report.html at the end. The CLI and the
  * end-to-end tests both use it.
  */
final class FleetRun private (
    val settings: RunSettings,
    val metrics: FleetMetrics,
    val controller: Option[Controller],
    val controllerUrl: String,
    val dashboard: Option[Dashboard],
    transport: Transport,
    tunnels: Option[Tunnels],
    wheel: TimingWheel,
    fleet: ActorRef[Fleet.Command],
    exporters: Exporters,
    startedAt: Instant)(using system: ActorSystem[?]):
  private given ExecutionContext = system.executionContext
  private val process = ProcessWatch()
  private val sampler = Sampler(metrics.kinds, () => metrics.snapshot(), process, settings.fleet.devices, settings.transport)
  private val timeseries = Timeseries.create(settings.resultsDir)
  @volatile private var listeners = List.empty[Sample => Unit]
  @volatile private var finishing: Option[Future[Summary]] = None

  private val ticker: Cancellable =
    val io = system.dispatchers.lookup(DispatcherSelector.blocking()) // the file and the console block
    system.scheduler.scheduleAtFixedRate(settings.statusInterval, settings.statusInterval)(() => tick())(using io)

  private def tick(): Unit =
    val sample = sampler.sample()
    timeseries.append(sample)
    dashboard.foreach(_.publish(sample))
    listeners.foreach(_(sample))

  /** Calls `listener` with every sample from now on (the status line, say). */
  def onSample(listener: Sample => Unit): Unit = synchronized { listeners = listeners :+ listener }

  /** Stops the devices sending, waits for the calls in flight to be answered, folds the figures into
    * a summary, writes summary.json and report.html, and stops the devices. Called once per run;
    * later calls get the same summary.
    */
  def finish(stopReason: String): Future[Summary] = synchronized {
    finishing.getOrElse {
      ticker.cancel()
      // Taken before the devices stop, leave their states and close their tunnels.
      val byState = metrics.devicesByState
      val tunnelsUp = metrics.tunnelsUpNow
      given Timeout = Timeout(30.seconds)
      val done = for
        _ <- fleet.ask[Done](Fleet.Quiesce(_))(using summon[Timeout], system.scheduler)
        _ <- drained(Deadline.now + settings.http.requestTimeout + 1.second)
        snapshot = metrics.snapshot()
        _ <- fleet.ask[Done](Fleet.Stop(_))(using summon[Timeout], system.scheduler)
      yield
        val ended = Instant.now
        val info = RunInfo(startedAt.toString, ended.toString, (ended.toEpochMilli - startedAt.toEpochMilli) / 1000.0,
          stopReason, controllerUrl, controller.isDefined, settings.transport, settings.profile.name)
        val summary = Summary.of(info, settings.fleet.devices, byState, Option.when(tunnels.isDefined)(tunnelsUp), snapshot,
          process.sample(), controller.map(_.counts))
        timeseries.close()
        Summary.write(summary, settings.resultsDir)
        Report.write(settings.resultsDir)
        summary
      val closed = for
        summary <- done
        _ <- tunnels.fold(Future.successful(Done))(_.close())
        _ <- transport.close()
        _ = wheel.close()
        _ <- controller.fold(Future.successful(Done))(_.stop())
      yield summary
      finishing = Some(closed)
      closed
    }
  }

  /** Every call sent has been answered or has timed out, so sent = ok + forbidden + failed. */
  private def drained(deadline: Deadline): Future[Done] =
    if metrics.inFlight == 0 || deadline.isOverdue() then Future.successful(Done)
    else after(10.millis)(drained(deadline))

object FleetRun:
  def start(settings: RunSettings)(using system: ActorSystem[SpawnProtocol.Command]): Future[FleetRun] =
    given ExecutionContext = system.executionContext
    Files.createDirectories(settings.resultsDir)
    Files.writeString(settings.resultsDir.resolve(Report.ConfigFile), settings.described)
    val exporters = Exporters(prometheus = settings.dashboard.enabled, statsd = settings.statsd)
    system.whenTerminated.foreach(_ => exporters.close()) // /metrics answers until the very end
    val mqtt = settings.transport == "mqtt"
    val embedded =
      if !settings.embedded then Future.successful(None)
      else Controller.start(settings.controller, ssh = settings.ssh.isDefined, mqtt = mqtt).map(Some(_))
    val dashboard = exporters.prometheus.filter(_ => settings.dashboard.enabled) match
      case Some(prometheus) => Dashboard.start(settings.dashboard, settings.described, prometheus).map(Some(_))
      case None => Future.successful(None)
    for
      controller <- embedded
      board <- dashboard
      // MQTT devices call the broker; the others the controller.
      url = Uri(if mqtt then settings.broker.orElse(controller.flatMap(_.mqtt).map(_.url)).get else settings.controllerUrl.orElse(controller.map(_.url)).get)
      sshTunnels = settings.ssh.map { ssh =>
        val (host, port) = ssh.target.getOrElse(url.authority.host.address -> url.effectivePort)
        SshTunnels(ssh, SshdSocketAddress(host, port), settings.http)
      }
      metrics = FleetMetrics(settings.profile.kinds, exporters.registry)
      _ = controller.foreach(c => exporters.bindController(() => c.counts))
      host = url.authority.host.address
      embeddedCa = controller.flatMap(_.tls).map(_.authority)
      tls = Option.when(url.scheme == "https") {
        FleetTls(host, url.effectivePort, FleetTls.trust(settings.tls, embeddedCa.map(_.certificate)),
          FleetTls.certificates(settings.tls, embeddedCa.filter(_ => settings.controller.clientCertsRequired)), settings.profile.identityName,
          settings.tls.protocols)
      }
      port = if url.authority.port != 0 then url.authority.port else url.scheme match
        case "mqtts" => 8883
        case "mqtt" => 1883
        case _ => url.effectivePort
      http: Transport =
        if mqtt then Transport.Unused
        else HttpTransport(host, port, Dialer(host, port, settings.http, tls, settings.sourceIps), settings.connection, settings.http, settings.fleet.devices)
      transport = MeteredTransport(http, metrics)
      mqttSessions = settings.profile.mqtt.filter(_ => mqtt).map { options =>
        val mqttTls = Option.when(url.scheme == "mqtts")(MqttTls(FleetTls.trust(settings.tls, None), FleetTls.certificates(settings.tls, None),
          settings.profile.identityName, settings.tls.protocols))
        MqttSessions(host, port, options, mqttTls.map(t => t.forDevice), settings.sourceIps, settings.http.connectTimeout,
          settings.http.requestTimeout)
      }
      tunnels = sshTunnels.orElse(mqttSessions).map(MeteredTunnels(_, metrics))
      random: RandomGenerator = () => ThreadLocalRandom.current().nextLong()
      wheel = TimingWheel()
      shared = Device.Shared(settings.profile, settings.device, transport, tunnels, metrics, wheel, random)
      device = (i: Int) => Device.props(i, shared)
      fleet <- system.ask[ActorRef[Fleet.Command]](SpawnProtocol.Spawn(Fleet(settings.fleet, device), "fleet", Props.empty, _))(using
        Timeout(10.seconds), system.scheduler)
    yield FleetRun(settings, metrics, controller, url.toString, board, http, tunnels, wheel, fleet, exporters, Instant.now)
