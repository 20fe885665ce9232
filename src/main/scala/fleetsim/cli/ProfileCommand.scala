package fleetsim.cli

import fleetsim.UsageError

import com.typesafe.config.ConfigFactory
import fleetsim.device.{Call, DeviceProfile, First, Spread}
import fleetsim.fleet.FleetSettings
import fleetsim.profile.{FleetContext, ProfileLoader, Specimen, TemplateCall}
import fleetsim.run.TransportKinds

import java.io.PrintStream
import java.nio.charset.StandardCharsets.UTF_8

/** `fleetsim profile check NAME|FILE` validates a device profile and prints what device 0 and
  * device 1 would send, sending nothing; `fleetsim profile show NAME` prints a built-in profile as a
  * starting point for your own.
  */
object ProfileCommand:
  val Usage: String =
    s"""usage: ./fleetsim profile check NAME|FILE   validate a device profile; print device 0's and 1's calls, send nothing
       |       ./fleetsim profile show NAME         print a built-in profile (${ProfileLoader.BuiltIn.mkString(", ")})""".stripMargin

  def apply(args: List[String], out: PrintStream): Int = args match
    case ("--help" | "-h") :: _ => out.println(Usage); 0
    case "show" :: name :: Nil =>
      val text = ProfileLoader.builtInText(name).getOrElse(throw UsageError(
        s"no built-in profile '$name'${Options.suggest(name, ProfileLoader.BuiltIn).replace("--", "")}; there are ${ProfileLoader.BuiltIn.mkString(", ")}", "profile"))
      out.print(text)
      0
    case "check" :: nameOrFile :: Nil =>
      val config = ConfigFactory.load()
      val fleet = settingsOf("profile")(FleetSettings(config)).copy(devices = 2)
      val parsed = settingsOf("profile")(ProfileLoader.parse(nameOrFile, config, TransportKinds))
      val profile = settingsOf("profile")(parsed.compile(FleetContext(fleet, Some("ssh-ed25519 AAAA... (the run's key)"), config)))
      out.println(s"fleetsim: $nameOrFile is a valid device profile: message kinds ${profile.kinds.map(_.key).mkString(", ")}; " +
        s"kept per device: ${profile.registers} numbers (its schedule included) and ${profile.texts} texts")
      val l = parsed.limits
      out.println(s"replies are read up to: a status line of ${bytes(l.statusLine)}, ${l.headers} header lines, ${bytes(l.head)} of head, " +
        s"${bytes(l.body)} of body (limits); past one, a call fails as tooLarge")
      parsed.connectTimeout.foreach(t => out.println(s"devices wait ${Spread.show(t.toNanos)} for a connection (connect-timeout), whatever the run's"))
      out.println("(what replies would have set shows as its default: nothing was sent)")
      for number <- 0 to 1 do
        out.println()
        out.println(s"device $number:")
        val device = Specimen(number, profile)
        def show(call: Call, when: String): Unit =
          val request = call.render(device)
          out.println(s"  ${request.kind.key} ($when): ${request.method} ${request.path}")
          String(request.headers, UTF_8).split("\r\n").filter(_.nonEmpty).foreach(h => out.println(s"    $h"))
          if request.body.nonEmpty then out.println(s"    ${String(request.body, UTF_8)}")
          call match
            case t: TemplateCall if t.notes.nonEmpty => out.println(s"    (${t.notes})")
            case _ => ()
        profile.startDelayed.foreach(d => out.println(s"  (boots, then waits a random $d before its first call)"))
        val first = if profile.resumes(device) then "first: its identity row makes it known" else "first"
        profile.resume.filter(_ => profile.resumes(device)).orElse(profile.join).foreach(show(_, first))
        profile.messages.zipWithIndex.foreach { (m, i) =>
          device.registers(fleetsim.device.Registers.seq(i)) = 1
          val seconds = m.interval(device) / 1_000_000_000L
          val every = if seconds > 0 then s"every $seconds s" else "every interval the join reply sets"
          m.calls.foreach(show(_, if m.first == First.RandomPhase then every else s"$every; first: ${m.first}"))
        }
        profile.triggers.foreach(_.calls.foreach(show(_, "when behind")))
      0
    case _ => throw UsageError("profile takes check NAME|FILE or show NAME", "profile")

  private def bytes(n: Int): String =
    val (mib, kib) = (1 << 20, 1 << 10)
    if n >= mib && n % mib == 0 then s"${n / mib} MiB" else if n >= kib && n % kib == 0 then s"${n / kib} KiB" else s"$n bytes"
