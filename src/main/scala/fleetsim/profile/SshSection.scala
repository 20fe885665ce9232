package fleetsim.profile

import com.typesafe.config.Config

/** SSH's part of a device profile: the `ssh` block, the name a device logs in with (its MAC unless
  * it says) and where its tunnel goes, when the join reply says (a host and a port it keeps). An
  * HTTP profile's devices may tunnel whatever the profile's transport (--transport ssh), so every
  * profile but an MQTT one has this section.
  */
private[profile] object SshSection extends TransportSection:
  import ProfileChecks.*

  val keys: Set[String] = Set("ssh")

  def compile(root: Config, identity: Identity, kept: KeptValues, calls: CallCompiler): TransportParts =
    if !root.hasPath("ssh") then TransportParts(calls.compileCall("{{mac}}", root.root, atJoin = false, Escape.None, "ssh.login"), None, None)
    else
      val block = blockAt(root, "ssh", "ssh")
      keysOf(block, Set("host", "port", "login"), "ssh")
      val c = block.toConfig
      val login = if c.hasPath("login") then calls.compileCall(string(c, "login"), c.getValue("login"), atJoin = false, Escape.None, "ssh.login")
        else calls.compileCall("{{mac}}", block, atJoin = false, Escape.None, "ssh.login")
      val endpoint = Option.when(c.hasPath("host"))(kept.resolved(kept.slotNamed(c, "host", "ssh.host")) -> kept.resolved(kept.slotNamed(c, "port", "ssh.port")))
      TransportParts(login, endpoint, None)
