package fleetsim.cli

import fleetsim.UsageError

import fleetsim.controller.{ControllerSettings, SshGateway}
import org.apache.pekko.actor.typed.ActorSystem
import org.apache.pekko.actor.typed.scaladsl.Behaviors
import org.apache.pekko.http.scaladsl.model.Uri

import java.io.PrintStream
import scala.concurrent.Await
import scala.concurrent.duration.*

/** `fleetsim ssh-gateway --controller URL`: an SSH server in a process of its own for the reference
  * controller's devices, so that a fleet's tunnels can outnumber what one process may hold open.
  * The controller sends devices to it with `--ssh-gateways`.
  */
object SshGatewayCommand:
  val Flags: Seq[Flag] = Seq(Flag.Controller, Flag.SshPort, Flag.Host, Flag.StateDir)

  def apply(args: List[String], out: PrintStream): Int =
    Options.parse("ssh-gateway", Flags, args) match
      case Parsed.Help(text) => out.println(text); 0
      case Parsed.Settings(config) =>
        val url = config.getString(Flag.Controller.path)
        if url.isEmpty then throw UsageError("ssh-gateway needs --controller URL: the reference controller its tunnels lead to", "ssh-gateway")
        val settings = settingsOf("ssh-gateway")(ControllerSettings(config))
        given system: ActorSystem[Nothing] = ActorSystem(Behaviors.empty, "fleetsim-ssh-gateway", config)
        val gateway = bindOrExplain(Flag.SshPort, system)(SshGateway.forwarding(settings, Uri(url)))
        val at = s"${gateway.address.getHostString}:${gateway.address.getPort}"
        out.println(s"fleetsim ssh-gateway: SSH on $at, tunnels lead to $url; start the controller with --ssh-gateways $at. Ctrl-C stops")
        out.flush()
        Await.result(system.whenTerminated, Duration.Inf)
        0
