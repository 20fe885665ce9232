package fleetsim.run

import com.typesafe.config.Config
import fleetsim.control.RunAction
import fleetsim.controller.{Controller, ControllerSettings}
import fleetsim.device.DeviceState
import fleetsim.metrics.{MetricsSnapshot, TunnelSample}
import fleetsim.profile.{HttpSection, ProfileSection}
import fleetsim.report.{Summary, TunnelsSummary}
import fleetsim.transport.ssh.{HostKeys, SshSettings, SshTunnels}
import org.apache.pekko.actor.typed.ActorSystem
import org.apache.sshd.common.config.keys.PublicKeyEntry
import org.apache.sshd.common.util.net.SshdSocketAddress

import scala.concurrent.Future

/** Devices that join over HTTP, then open an SSH tunnel each (docs/ssh.md), through which their
  * calls go; a lost tunnel is opened again (Tunneling) without a join.
  */
final class SshKind(val ssh: SshSettings) extends TransportKind:
  def entry: TransportKinds.Entry = SshKind

  override def embed(settings: ControllerSettings)(using ActorSystem[?]): Future[Controller] = Controller.start(settings, ssh = true)

  override def sessions: Option[String] = Some("SSH tunnels")
  /** An SSH session, its channel and buffers: 35.2 KB measured at 4,000 tunnels, 27.5 at 19,000 (bench/footprint.sh ssh). */
  def heapPerDevice(tls: Boolean, ownConnection: Boolean): Long = 60_000
  override def preflight(): Unit = HostKeys.check(ssh).left.foreach(m => throw fleetsim.UsageError(m, "run"))
  override def joinKey: Option[String] = Some(PublicKeyEntry.toString(ssh.keys.getPublic))

  def parts(made: FleetParts.Making): TransportKind.Parts =
    import made.given
    val (host, port) = ssh.target.getOrElse(made.host -> made.url.effectivePort)
    TransportKind.Parts(made.controller, Some(made.gated(SshTunnels(ssh, SshdSocketAddress(host, port), made.settings.http), ssh.maxHandshakes)))

  override def statusFields(t: TunnelSample): String =
    f"tunnels ${t.up} up, ${t.opening} opening, ${t.retunnels} re-tunnels, handshake p99 ${fleetsim.report.ConsoleOutput.ms(t.handshakeP99Ms)}"

  override def sessionSample(s: MetricsSnapshot, rate: (MetricsSnapshot => Long) => Double): Option[TunnelSample] =
    Some(TunnelSample(s.tunnels.up, s.byState(DeviceState.Tunneling), s.tunnels.retunnels, rate(_.tunnels.retunnels), s.tunnels.recent.latency.p99))

  override def withSessions(summary: Summary, metrics: MetricsSnapshot, upAtEnd: Long): Summary =
    val t = metrics.tunnels
    summary.copy(tunnels = Some(TunnelsSummary(t.opened, upAtEnd, t.retunnels, Summary.failures(t.failures), Summary.latencySummary(t.overall))))

object SshKind extends TransportKinds.Entry("ssh", defaultProfile = "ap-v1", help = "a tunnel per device"):
  override def sessionDrop: Option[RunAction] = Some(RunAction.SshDrop)
  /** Its devices' calls are HTTP's, through their tunnels; the section's ssh block says where those go. */
  def profileSection: ProfileSection = HttpSection
  def read(config: Config): TransportKind = SshKind(SshSettings(config))
