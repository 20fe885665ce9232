package fleetsim.cli

import fleetsim.run.{RunSettings, FleetRun, Preflight}

import fleetsim.cluster.{ClusterConfig, ClusterRun}
import fleetsim.report.Summary
import org.apache.pekko.Done
import org.apache.pekko.actor.CoordinatedShutdown
import org.apache.pekko.actor.typed.{ActorSystem, DispatcherSelector, SpawnProtocol}

import java.io.PrintStream
import scala.concurrent.duration.*
import java.util.concurrent.atomic.AtomicInteger
import scala.concurrent.{Await, ExecutionContext, Promise}

/** `fleetsim run`: a fleet for a while, a status line every second, a summary at the end, also
  * on Ctrl-C and SIGTERM (the summary is written in a coordinated-shutdown task). Ctrl-C waits for
  * the calls in flight, up to the request timeout; Ctrl-C again writes the summary without waiting
  * for them (they count as `interrupted`) and exits. A run with thresholds exits with code 3 when
  * its summary's verdict failed.
  */
object RunCommand:
  val Flags: Seq[Flag] = Seq(
    Flag.Devices, Flag.DeviceProfile, Flag.DevicesCsv, Flag.Duration, Flag.RampRate, Flag.Controller, Flag.ControllerPort, Flag.HeartbeatInterval,
    Flag.StatsInterval, Flag.Results, Flag.MaxConnections, Flag.Pipelining, Flag.RequestTimeout, Flag.MaxLostHeartbeats, Flag.Transport, Flag.Broker,
    Flag.MaxConnects, Flag.ControllerSsh, Flag.SshUser, Flag.SshKey, Flag.SshPassword, Flag.HostKeys, Flag.KnownHosts, Flag.MaxHandshakes,
    Flag.SshTarget, Flag.SshPort, Flag.Dashboard, Flag.DashboardHost, Flag.DashboardPort, Flag.DashboardToken, Flag.Statsd, Flag.Profile,
    Flag.SourceIps, Flag.CaFile, Flag.InsecureTls, Flag.TlsVersion, Flag.ClientCa, Flag.ClientCaKey, Flag.ClientCerts, Flag.Tls,
    Flag.ClientCertsRequired, Flag.Cluster, Flag.ClusterNodes, Flag.ClusterHost, Flag.Threshold,
    Flag.Scenario, Flag.Seed)

  /** Why the run ended, as summary.json says it. */
  private case object DurationReached extends CoordinatedShutdown.Reason
  /** The run was stopped through its control ([[fleetsim.control.RunControl.stop]]): it has its summary already. */
  private case object Finished extends CoordinatedShutdown.Reason

  def apply(args: List[String], out: PrintStream, err: PrintStream): Int =
    Options.parse("run", Flags, args) match
      case Parsed.Help(text) => out.println(text); 0
      case Parsed.Settings(config) =>
        val settings = settingsOf("run")(RunSettings(config))
        val join = config.getString("fleetsim.cluster.join")
        if join.isEmpty then Preflight.check(settings) else Preflight.checkRunner(settings) // each node checks its own share
        Preflight.resultsFolder(settings)
        if settings.tls.insecure then
          err.println(s"fleetsim: warning: --insecure-tls: the ${settings.transport.server.name}'s certificate is not checked, so anyone on the path could pose as it")
        given system: ActorSystem[SpawnProtocol.Command] =
          if join.isEmpty then ActorSystem(SpawnProtocol(), "fleetsim", config)
          else ActorSystem(SpawnProtocol(), ClusterConfig.SystemName, settingsOf("run")(ClusterConfig.runner(config)))
        val run = bindOrExplain(Flag.ControllerPort, system, if join.isEmpty then 30.seconds else 4.minutes) {
          if join.isEmpty then FleetRun.start(settings, Some(out))
          else FleetRun.start(settings, ClusterRun.placement(settings, config, join, config.getInt("fleetsim.cluster.nodes")), Some(out))
        }
        execute(run, out)

  /** What the launcher (`./fleetsim`) sizes the JVM by, as the run's settings come to with every file
    * read, on one line: the devices this process holds (none over a cluster: they are the nodes'),
    * the bytes of live heap a device takes, its transport, and whether the run is over a cluster.
    * Asked only when a file (a config, a scenario, a device profile) may set them; what the settings
    * get wrong is said here as `run` would say it.
    */
  def launchFacts(args: List[String], out: PrintStream): Int =
    Options.parse("run", Flags, args) match
      case Parsed.Help(_) => 0
      case Parsed.Settings(config) =>
        val settings = settingsOf("run")(RunSettings(config))
        val cluster = config.getString("fleetsim.cluster.join").nonEmpty
        out.println(s"${if cluster then 0 else settings.fleet.devices} ${Preflight.heapPerDevice(settings)} ${settings.transport.name} ${if cluster then "yes" else "no"}")
        0

  private def execute(run: FleetRun, out: PrintStream)(using system: ActorSystem[SpawnProtocol.Command]): Int =
    val settings = run.settings
    val shutdown = CoordinatedShutdown(system)
    val io: ExecutionContext = system.dispatchers.lookup(DispatcherSelector.blocking())

    val summarized = Promise[Done]()
    val interrupts = AtomicInteger()
    onCtrlC { () =>
      interrupts.incrementAndGet() match
        case 1 =>
          out.println(s"\nfleetsim: stopping: waiting up to ${settings.drainWait.toSeconds} s for the calls in flight; Ctrl-C again to stop now")
          shutdown.run(CoordinatedShutdown.JvmExitReason)
        case 2 =>
          out.println("\nfleetsim: stopping now: the calls in flight count as interrupted")
          run.hurry()
          summarized.future.onComplete(_ => Runtime.getRuntime.halt(130))(using ExecutionContext.parasitic) // what is left closes with the process
        case _ => Runtime.getRuntime.halt(130)
    }

    shutdown.addTask(CoordinatedShutdown.PhaseBeforeServiceUnbind, "fleet-summary") { () =>
      val reason = shutdown.shutdownReason() match
        case Some(DurationReached) => "duration reached"
        case _ => "interrupted"
      run.finish(reason).map { _ => // the console output has printed the summary
        summarized.trySuccess(Done)
        Done
      }(using io)
    }
    // Only once the summary is sure to be written on the way out.
    settings.fleet.duration.foreach(d => system.scheduler.scheduleOnce(d, () => shutdown.run(DurationReached))(using io))
    run.finished.onComplete(_ => shutdown.run(Finished))(using io)
    Await.result(system.whenTerminated, Duration.Inf)
    if interrupts.get > 0 then 130 // as a shell reports a program Ctrl-C ended
    else if run.finished.value.flatMap(_.toOption).flatMap(_.verdict).exists(!_.passed) then ThresholdFailed
    else 0

  /** The exit code of a run whose verdict failed: a threshold did not hold. */
  val ThresholdFailed = 3

  /** Runs `handler` on each Ctrl-C (SIGINT) instead of the JVM's exit, unless SIGINT is ignored
    * (a background job's), which it leaves so.
    */
  private def onCtrlC(handler: () => Unit): Unit =
    val int = sun.misc.Signal("INT")
    val before = sun.misc.Signal.handle(int, _ => handler())
    if before == sun.misc.SignalHandler.SIG_IGN then sun.misc.Signal.handle(int, before)
