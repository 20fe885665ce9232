package fleetsim.profile

import com.typesafe.config.{Config, ConfigObject, ConfigValue}
import fleetsim.transport.MessageKind

/** The section of devices that call paths over HTTP: a profile that names no transport has it, and
  * so do the HTTP and SSH kinds (an HTTP profile's devices may tunnel, --transport ssh). A device
  * joins first (`join`, or `resume` when its identity row makes it known), its calls may have a form
  * body, and reactions and connections are the profile's to say. Its `ssh` block: the name a device
  * logs in with (its MAC unless it says), and where its tunnel goes when the join reply says (a host
  * and a port it keeps).
  */
object HttpSection extends ProfileSection:
  import ProfileChecks.*

  private[profile] val keys: Set[String] = Set("connection", "join", "resume", "reactions", "connect-timeout", "ssh")
  private[profile] val described = "a device profile (MQTT's mqtt and pushes need transport = mqtt)"
  private[profile] val profileIs = "describes HTTP calls"
  private[profile] def needs(transport: String): String = "a profile of HTTP calls (paths instead of topics)"
  private[profile] val targetKeys: Set[String] = Set("path")
  private[profile] val bodyKeys: Seq[String] = Seq("json", "form", "text")

  private[profile] override def checkKeys(root: Config): Unit =
    if !root.hasPath("join") then fail(root.root, "a device profile needs a join block: the call a device makes first")

  private[profile] def call(calls: CallCompiler, kept: KeptValues, block: ConfigObject, kindOf: ConfigValue => MessageKind, what: String,
      atJoin: Boolean, message: Int, notAdmitted: Set[Int]): TemplateCall =
    calls.httpCall(block, kindOf, what, atJoin, message, notAdmitted, "path")

  private[profile] def compile(root: Config, identity: Identity, kept: KeptValues, calls: CallCompiler): TransportParts =
    if !root.hasPath("ssh") then TransportParts(calls.compileCall("{{mac}}", root.root, atJoin = false, Escape.None, "ssh.login"), None, None)
    else
      val block = blockAt(root, "ssh", "ssh")
      keysOf(block, Set("host", "port", "login"), "ssh")
      val c = block.toConfig
      val login = if c.hasPath("login") then calls.compileCall(string(c, "login"), c.getValue("login"), atJoin = false, Escape.None, "ssh.login")
        else calls.compileCall("{{mac}}", block, atJoin = false, Escape.None, "ssh.login")
      val endpoint = Option.when(c.hasPath("host"))(kept.resolved(kept.slotNamed(c, "host", "ssh.host")) -> kept.resolved(kept.slotNamed(c, "port", "ssh.port")))
      TransportParts(login, endpoint, None)
