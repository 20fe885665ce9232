package fleetsim.cli

import fleetsim.controller.{Controller, ControllerSettings}
import org.apache.pekko.actor.typed.ActorSystem
import org.apache.pekko.actor.typed.scaladsl.Behaviors

import java.io.PrintStream
import scala.concurrent.Await
import scala.concurrent.duration.*

/** `fleetsim controller`: the reference controller in its own process, until Ctrl-C. */
object ControllerCommand:
  val Flags: Seq[Flag] =
    Seq(Flag.Port, Flag.SshPort, Flag.Host, Flag.HeartbeatInterval, Flag.StatsInterval, Flag.ConfigSize, Flag.ControllerSshPassword, Flag.StateDir, Flag.AgentKeyLifetime, Flag.IotTokens, Flag.Tls, Flag.ClientCertsRequired, Flag.Mqtt, Flag.MqttPort, Flag.SshGateways, Flag.Profile)

  def apply(args: List[String], out: PrintStream, err: PrintStream): Int =
    Options.parse("controller", Flags, args) match
      case Parsed.Help(text) => out.println(text); 0
      case Parsed.Settings(config) =>
        val settings = settingsOf("controller")(ControllerSettings(config))
        given system: ActorSystem[Nothing] = ActorSystem(Behaviors.empty, "fleetsim-controller", config)
        val controller = bindOrExplain(Flag.Port, system)(Controller.start(settings, ssh = true, mqtt = config.getBoolean("fleetsim.controller.mqtt")))
        val ssh = controller.ssh.fold("")(g => s", SSH on ${g.address.getHostString}:${g.address.getPort}")
        out.println(s"fleetsim controller listening on ${controller.url}$ssh (protocol v1 under /api/v1, the ap-agent and iot-telemetry dialects under /agent and /iot/v1, admin API under /admin, loopback only)")
        controller.mqtt.foreach(b => out.println(s"MQTT broker on ${b.url} (fleets: --transport mqtt --broker ${b.url}); the controller counts their telemetry and pushes through it"))
        controller.tls.foreach(t => out.println(s"HTTPS with the CA in ${t.caFile} (fleets: --ca-file ${t.caFile})"))
        out.println(s"devices get heartbeat every ${settings.heartbeatInterval.toSeconds}s, stats every ${settings.statsInterval.toSeconds}s; Ctrl-C stops")
        out.flush()
        Await.result(system.whenTerminated, Duration.Inf)
        0
