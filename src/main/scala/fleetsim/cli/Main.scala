package fleetsim.cli

import fleetsim.{UsageError, CannotRun}

import java.io.PrintStream

/** `fleetsim run|controller [flags]`. Exit codes: 0 done, 1 could not run here (port taken, too
  * many files), 2 bad input, 3 a run's threshold failed (its verdict), 130 stopped by Ctrl-C; never a
  * stack trace for a user's mistake.
  */
object Main:
  val Usage: String =
    """usage: ./fleetsim <command> [flags]
      |
      |commands:
      |  run         run a fleet of simulated devices against a controller (the embedded one by default)
      |  controller  run the reference controller alone
      |  node        carry devices for runs over a cluster (run --cluster)
      |  ssh-gateway an SSH server of its own for the reference controller's devices' tunnels
      |  report DIR  rebuild DIR/report.html from the run's files in DIR (after a crash, say)
      |  profile     check a device profile (what its devices would send), or show a built-in one
      |
      |./fleetsim <command> --help lists a command's flags.""".stripMargin

  private val Commands = Seq("run", "controller", "node", "ssh-gateway", "report", "profile")

  def main(args: Array[String]): Unit =
    org.slf4j.LoggerFactory.getILoggerFactory // initialise logging before threads log, or SLF4J warns about replayed calls
    val code = run(args.toList, System.out, System.err)
    System.exit(code)

  def run(args: List[String], out: PrintStream, err: PrintStream): Int =
    try
      args match
        case "run" :: rest => RunCommand(rest, out, err)
        case "controller" :: rest => ControllerCommand(rest, out, err)
        case "node" :: rest => NodeCommand(rest, out)
        case "ssh-gateway" :: rest => SshGatewayCommand(rest, out)
        case "profile" :: rest => ProfileCommand(rest, out)
        case "launch-facts" :: "run" :: rest => RunCommand.launchFacts(rest, out) // the launcher's, not a user's
        case "report" :: ("--help" | "-h") :: _ => out.println("usage: ./fleetsim report DIR"); 0
        case "report" :: dir :: Nil => report(java.nio.file.Path.of(dir), out)
        case "report" :: _ => throw UsageError("report takes one folder, a run's results (the one with timeseries.jsonl)", "report")
        case ("--help" | "-h" | "help") :: _ => out.println(Usage); 0
        case Nil => err.println(Usage); 2
        case other :: _ => throw UsageError(s"unknown command '$other'${Options.suggest(other, Commands).replace("--", "")}", "")
    catch
      case e: UsageError =>
        err.println(s"fleetsim: ${shown(e.getMessage)}")
        err.println(s"Try './fleetsim ${if e.command.isEmpty then "" else e.command + " "}--help'.")
        2
      case e: fleetsim.tls.TlsFileError =>
        err.println(s"fleetsim: ${shown(e.getMessage)}")
        2
      case e: CannotRun =>
        err.println(s"fleetsim: ${shown(e.getMessage)}")
        1

/** A message as it may reach the terminal: one line, no credentials of a URL, no control characters
  * (a user's file can hold any bytes, and an error may quote them).
  */
private def shown(message: String): String =
  fleetsim.Redact.urls(String.valueOf(message)).map(c => if c < ' ' || c == '\u007f' then '?' else c)

/** `fleetsim report DIR`: the page again, from what the run left. */
private def report(dir: java.nio.file.Path, out: PrintStream): Int =
  if !java.nio.file.Files.isDirectory(dir) then
    throw UsageError(s"no such folder '$dir': name a run's results folder, like results/<timestamp>", "report")
  if !java.nio.file.Files.isRegularFile(dir.resolve(fleetsim.report.Timeseries.FileName)) then
    throw UsageError(s"'$dir' holds no ${fleetsim.report.Timeseries.FileName}: name a run's results folder", "report")
  out.println(s"fleetsim: wrote ${fleetsim.report.Report.write(dir)}")
  0


/** Reads settings, turning a bad value in a config file into a one-line usage error. */
private[cli] def settingsOf[A](command: String)(read: => A): A =
  try read
  catch
    case e: com.typesafe.config.ConfigException => throw UsageError(e.getMessage, command)
    case e: IllegalArgumentException => throw UsageError(e.getMessage.stripPrefix("requirement failed: "), command)
    case e: fleetsim.profile.ProfileError => throw UsageError(e.getMessage, command)

/** Waits for a run's servers to bind (and, over a cluster, for its nodes to take it); a taken port
  * becomes a one-line error naming the flag that moves it. On any failure the actor system stops
  * first, so a cluster member leaves the cluster rather than vanish from it.
  */
private[cli] def bindOrExplain[A](httpPort: Flag, system: org.apache.pekko.actor.typed.ActorSystem[?],
    within: scala.concurrent.duration.FiniteDuration = scala.concurrent.duration.Duration(30, "s"))(binding: => scala.concurrent.Future[A]): A =
  def stopped(e: Throwable): Throwable =
    system.terminate()
    scala.util.Try(scala.concurrent.Await.ready(system.whenTerminated, scala.concurrent.duration.Duration(10, "s")))
    e
  try scala.concurrent.Await.result(binding, within)
  catch
    case e: fleetsim.CannotBind if e.portTaken =>
      val flag = e.service match
        case "ssh" => Flag.SshPort
        case "dashboard" => Flag.DashboardPort
        case "mqtt" => Flag.MqttPort
        case _ => httpPort
      throw stopped(CannotRun(s"${e.getMessage}: choose another with --${flag.name} (0 picks a free one)"))
    case e: fleetsim.CannotBind =>
      val flag = if e.service == "dashboard" then Flag.DashboardHost else Flag.Host
      throw stopped(UsageError(s"${e.getMessage}: give --${flag.name} an address it has, like 127.0.0.1 (or 0.0.0.0 for all of them)", ""))
    case _: java.util.concurrent.TimeoutException =>
      throw stopped(CannotRun(s"the run did not start within ${within.toSeconds} s"))
    case e: Throwable => throw stopped(e)
