package fleetsim.transport.ssh

import fleetsim.transport.SessionOffer

/** Where a device's tunnel goes: an SSH server's address, as the controller names it at join
  * (protocol v1's `ssh`) or as a gateway is reached.
  */
final case class SshEndpoint(host: String, port: Int) extends SessionOffer
