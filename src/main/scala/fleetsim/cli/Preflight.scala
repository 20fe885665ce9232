package fleetsim.cli

import fleetsim.fleet.DescriptorBudget
import fleetsim.metrics.ProcessWatch

import java.io.IOException
import java.net.{InetSocketAddress, Socket}

/** What would make every device fail the same way, found once before any device starts: one line
  * that says what to do beats a million identical failures.
  */
object Preflight:
  def check(settings: RunSettings): Unit =
    val tunnels = if settings.ssh.isDefined then settings.fleet.devices else 0
    DescriptorBudget.check(settings.connections, tunnels, settings.controllerUrl.isEmpty, ProcessWatch.openFileLimit)
      .left.foreach(m => throw CannotRun(m))
    for addresses <- settings.sourceIps; address <- addresses.samples.take(64) do
      val socket = Socket()
      try socket.bind(InetSocketAddress(address, 0))
      catch case e: IOException =>
        throw UsageError(s"--source-ips: cannot call from ${address.getHostAddress} (${e.getMessage}): give addresses this machine has (on loopback, any 127.x.y.z)", "run")
      finally socket.close()
