package fleetsim.profile

import com.typesafe.config.{Config, ConfigException, ConfigFactory, ConfigObject, ConfigParseOptions, ConfigUtil}
import fleetsim.HoconChecks
import fleetsim.HoconChecks.{Unreadable, positiveDuration}
import fleetsim.fleet.FleetSettings
import fleetsim.transport.{ConnectionMode, ReplyLimits}

import java.io.File
import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.Path
import scala.jdk.CollectionConverters.*

/** A mistake in a device profile: one line that says where (file:line), what, and how to fix it. */
final class ProfileError(message: String) extends Exception(message)

/** The HOCON checks, failing with a [[ProfileError]]. */
private[profile] val ProfileChecks = HoconChecks(ProfileError(_))

/** What a profile is compiled for: who the devices are, and what the run gives them.
  *
  * @param settings the run's layered config: a profile may use its values (`${fleetsim.fleet.model}`)
  * @param sshKey the fleet's SSH public key, sent at join when devices tunnel (a template's `sshKey`)
  */
final case class FleetContext(fleet: FleetSettings, sshKey: Option[String], settings: Config)

/** Reads device profiles — HOCON files describing a controller's API (docs/profiles.md) —
  * into a [[CompiledProfile]]. Everything is checked and compiled here, once: a bad profile never
  * reaches a device.
  */
object ProfileLoader:
  import ProfileChecks.*

  /** The profiles inside fleetsim, by name: `--device-profile ap-v1`. */
  val BuiltIn: Seq[String] = Seq("ap-v1", "ap-agent", "ap-shell", "iot-telemetry", "iot-mqtt")

  private def resource(name: String) = s"fleetsim/device-profiles/$name.conf"

  /** The text of a built-in profile, for `profile show`. */
  def builtInText(name: String): Option[String] =
    Option(getClass.getClassLoader.getResourceAsStream(resource(name))).filter(_ => BuiltIn.contains(name)).map { in =>
      try String(in.readAllBytes(), UTF_8) finally in.close()
    }

  /** A profile read but not compiled yet: what the run needs to know before it can compile it. */
  final class Parsed[+T <: ProfileTransport] private[ProfileLoader] (val name: String, config: Config, base: Option[Path],
      transports: ProfileTransports[T]):
    /** The transport the profile names, if any: needed before it is compiled, so checked here. */
    val transport: Option[T] = Option.when(config.hasPath("transport"))(config.getValue("transport")).map { value =>
      val named = String.valueOf(value.unwrapped)
      transports.named(named).getOrElse(fail(value, s"transport must be ${transports.listed} (got '$named')"))
    }
    /** Its section: its transport's; a profile that names none makes HTTP calls. */
    private val section = transport.fold(HttpSection)(_.profileSection)
    private val connection = Option.when(config.hasPath("connection"))(config.getValue("connection"))

    /** The transport a run of it has: the command line's (`asked`), else its own, else the run's
      * `default`. The one asked for must have its section: an HTTP profile's devices may tunnel
      * (--transport ssh), but they cannot publish.
      */
    def transportFor[K >: T <: ProfileTransport](asked: Option[K], default: K): K =
      for other <- asked if other.profileSection ne section do
        transport match
          // A profile that is not of HTTP calls is told which transport it runs with; any other, what the one asked needs.
          case Some(own) if section ne HttpSection =>
            failAt(config, "transport", s"profile $name ${section.profileIs}: run it with --transport ${own.name}, not ${other.name}")
          case _ =>
            val message = s"profile $name ${transport.fold(section.profileIs)(own => s"is for ${own.name} devices")}, " +
              s"and --transport ${other.name} needs ${other.profileSection.needs(other.name)}, like the built-in ${other.defaultProfile}"
            if transport.isDefined then failAt(config, "transport", message) else throw ProfileError(message)
      asked.orElse(transport).getOrElse(default)

    /** How the devices share connections: what the profile says, else shared, unless something
      * that identifies a device lives in its connection (`identity`, the flag that asks for it).
      */
    def connectionMode(identity: Option[String]): ConnectionMode = connection match
      case None => if identity.isDefined then ConnectionMode.PerDevice else ConnectionMode.Shared
      case Some(value) =>
        val mode = ConnectionMode.values.find(_.key == value.unwrapped).getOrElse(
          fail(value, s"connection must be ${ConnectionMode.values.map(_.key).mkString(", ")} (got '${value.unwrapped}')"))
        for flag <- identity if mode == ConnectionMode.Shared do
          fail(value, s"connection = shared cannot carry each device's own ${flag}: say per-device or per-call")
        mode

    /** What a reply may hold before the call fails as tooLarge: the profile's `limits`, over the defaults. */
    val limits: ReplyLimits =
      if !config.hasPath("limits") then ReplyLimits.Default
      else
        val block = config.getValue("limits") match
          case o: ConfigObject => o
          case v => fail(v, s"limits must be a block, like limits { body = 16 MiB }")
        val keys = Map("status-line" -> "bytes", "headers" -> "lines", "head" -> "bytes", "body" -> "bytes")
        for key <- block.keySet.asScala if !keys.contains(key) do
          fail(block.get(key), s"unknown key '$key' in limits; it may have ${keys.keys.toSeq.sorted.mkString(", ")}")
        val c = block.toConfig
        def size(key: String, default: Int, min: Long): Int =
          if !c.hasPath(key) then default
          else
            val value = c.getValue(key)
            val n = try if keys(key) == "lines" then c.getLong(key) else c.getBytes(key).longValue
              catch case _: ConfigException => fail(value, s"limits.$key must be ${if keys(key) == "lines" then "a number of lines, like 100" else "a size, like 64 KiB or 8 MiB"}")
            if n < min || n > Int.MaxValue / 2 then fail(value, s"limits.$key must be from $min to ${Int.MaxValue / 2} (got $n)")
            n.toInt
        val d = ReplyLimits.Default
        val statusLine = size("status-line", d.statusLine, 16)
        ReplyLimits(statusLine, size("headers", d.headers, 1), size("head", d.head.max(statusLine), statusLine), size("body", d.body, 0))

    /** How long the devices wait for a connection: the profile's `connect-timeout`, if it says. */
    val connectTimeout: Option[scala.concurrent.duration.FiniteDuration] =
      Option.when(config.hasPath("connect-timeout"))(config.getValue("connect-timeout")).map { value =>
        positiveDuration(config, "connect-timeout").getOrElse(fail(value, s"connect-timeout must be a duration, like 5s"))
      }

    def compile(context: FleetContext): CompiledProfile = ProfileCompiler(config, context, base, section).profile

  /** A built-in profile by name, or a file by path, with its ${...} resolved against the run's settings;
    * its `transport` one of `transports` (the run's kinds).
    */
  def parse[T <: ProfileTransport](nameOrFile: String, settings: Config, transports: ProfileTransports[T]): Parsed[T] =
    val (parsed, base) =
      if BuiltIn.contains(nameOrFile) then
        ConfigFactory.parseResources(resource(nameOrFile), ConfigParseOptions.defaults.setAllowMissing(false)) -> None
      else
        val file = File(nameOrFile)
        if !file.isFile then
          val hint = fleetsim.Suggest.closest(nameOrFile, BuiltIn).fold("")(n => s" (did you mean $n?)")
          throw ProfileError(s"no device profile '$nameOrFile'$hint: name a file, or one of the built-in profiles ${BuiltIn.mkString(", ")}")
        HoconChecks.read(file.toPath).fold({
          case Unreadable.NotText(problem) => throw ProfileError(problem)
          case Unreadable.NotHocon(problem) => throw ProfileError(s"$problem (not valid HOCON)")
        }, _ -> Option(file.getAbsoluteFile.getParentFile))
    // Resolved with the run's settings under it, then cut back to the profile's own keys
    // (resolveWith cannot resolve `key = ${?ENV}` overriding an earlier value).
    val resolved =
      try
        val merged = parsed.withFallback(settings).resolve()
        parsed.root.keySet.asScala.foldLeft(ConfigFactory.empty)((own, key) => own.withFallback(merged.withOnlyPath(ConfigUtil.quoteString(key))))
      catch
        case e: ConfigException =>
          throw ProfileError(s"${e.getMessage.linesIterator.next().take(300)} (a $${...} must name a setting, or use $${?NAME} for an optional environment variable)")
    new Parsed(nameOrFile, resolved, base.map(_.toPath), transports)

  /** A profile that names no transport (its devices make HTTP calls), compiled without a run's kinds: as the devices' tests load one. */
  def load(nameOrFile: String, context: FleetContext): CompiledProfile = parse(nameOrFile, context.settings, ProfileTransports.Empty).compile(context)
