package fleetsim.run

import fleetsim.control.{Leave, Reach, RunAction, RunControl}
import fleetsim.device.{Device, Selection}
import fleetsim.controller.{Controller, Faults}
import fleetsim.transport.NetworkFault
import fleetsim.fleet.Fleet
import fleetsim.metrics.*
import fleetsim.scenario.ScenarioDriver
import fleetsim.report.{ActionSummary, Output, Report, RunInfo, RunStart, Summary, Verdict}
import fleetsim.web.Dashboard
import org.apache.pekko.Done
import org.apache.pekko.actor.Cancellable
import org.apache.pekko.actor.typed.scaladsl.AskPattern.*
import org.apache.pekko.actor.typed.{ActorRef, ActorSystem, DispatcherSelector, Props, SpawnProtocol}
import org.apache.pekko.http.scaladsl.model.Uri
import org.apache.pekko.pattern.after
import org.apache.pekko.util.Timeout

import java.io.PrintStream
import java.nio.file.Files
import java.time.Instant
import scala.collection.immutable.ListMap
import scala.concurrent.duration.*
import scala.concurrent.{ExecutionContext, Future, Promise}

/** One run wired together: the embedded controller (unless pointed elsewhere), the devices (in this
  * process, or on a cluster's nodes), a sample every second (to the time-series file, the dashboard
  * and whoever else listens), and summary.json and report.html at the end. The CLI and the
  * end-to-end tests both use it, and what changes it while it runs goes through its [[RunControl]].
  */
final class FleetRun private (
    val settings: RunSettings,
    val devices: FleetDevices,
    val controller: Option[Controller],
    val controllerUrl: String, // as shown and written: credentials redacted
    made: ListMap[String, Output],
    startedAt: Instant)(using system: ActorSystem[?]) extends RunControl:
  private given ExecutionContext = system.executionContext
  private val process = ProcessWatch()
  private val sampler = Sampler(settings.profile.kinds, process, settings.fleet.devices, settings.transport)
  /** Where the start, each sample and the summary go, by name, in order ([[Outputs]]). */
  @volatile private var outputs: ListMap[String, Output] = made
  @volatile private var finishing: Option[Future[Summary]] = None
  @volatile private var hurried = false
  @volatile private var wanted = settings.startsWith
  /** The actions started, in order: action i is the cause of its devices' power switches. */
  @volatile private var acted = Vector.empty[FleetRun.Acted]
  /** What the controller went through while each action lasted. */
  private val windows = ActionWindows(settings.profile.join.map(_.kind.key) match
    case Some(join) => s => s.byKind.get(join).fold(0L)(_.ok)
    case None => s => s.tunnels.opened) // devices that join by opening their session
  /** The actions started since the last sample, for the next to mark. */
  private val unmarked = java.util.concurrent.ConcurrentLinkedQueue[ActionMark]()
  private val ended = Promise[Summary]()

  /** The summary, once the run has finished, whoever finished it: the CLI ends the process then. */
  def finished: Future[Summary] = ended.future

  /** The live dashboard, when the run has one. */
  def dashboard: Option[Dashboard] = made.values.collectFirst { case d: Dashboard => d }

  /** A run in one process: its devices' figures, live. */
  def metrics: FleetMetrics = devices match
    case local: LocalDevices => local.parts.metrics
    case _ => throw UnsupportedOperationException("a cluster run's figures are its nodes': listen to its samples")

  private val io = system.dispatchers.lookup(DispatcherSelector.blocking()) // the file and the console block
  private val log = org.slf4j.LoggerFactory.getLogger(classOf[FleetRun])
  each(_.start(RunStart(settings.fleet.devices, settings.transport.name, controllerUrl, settings.fleet.rampRate, settings.fleet.duration,
    settings.resultsDir, servers, settings.scenario.map((s, _) => s.file.toString -> s.description), settings.seed)))
  if wanted < planned then devices.resize(wanted, settings.fleet.rampRate, goodbye = false) // a cluster's blocks start later, and hear it first
  private val driver = settings.scenario.map((scenario, timeline) =>
    ScenarioDriver(scenario, timeline, settings.seed, this)(using system.classicSystem.scheduler))

  /** The servers the run started, as the console names them. */
  private def servers: Seq[String] =
    dashboard.map(d => s"dashboard on ${d.url} (Prometheus: ${d.url}metrics)").toSeq ++ controller.map { c =>
      val ssh = c.ssh.fold("")(g => s", SSH on ${g.address.getHostString}:${g.address.getPort}")
      s"reference controller on ${c.url}$ssh (admin API under /admin)"
    }
  private val sampling = java.util.concurrent.atomic.AtomicBoolean(false)
  private val ticker: Cancellable =
    system.scheduler.scheduleAtFixedRate(settings.statusInterval, settings.statusInterval)(() => tick())(using io)

  /** A sample from the devices' figures; skipped while the previous one is still being gathered. */
  private def tick(): Unit =
    if sampling.compareAndSet(false, true) then
      devices.snapshot().map { snapshot =>
        val marks = Iterator.continually(unmarked.poll()).takeWhile(_ != null).toList
        val sample = sampler.sample(snapshot, devices.cluster.fold(Map.empty)(_.nodes), wanted).copy(actions = marks)
        windows.second(snapshot, sample)
        each(_.sample(sample))
        judgeOnTheWay(snapshot)
      }(using io).onComplete(_ => sampling.set(false))

  /** Gives `output` every sample from now on, and the summary at the end. */
  def add(name: String, output: Output): Unit = synchronized { outputs = outputs.updated(name, output) }

  /** Tells every output, in order; one that fails is named in the log, and the others are still told. */
  private def each(tell: Output => Unit): Unit =
    for (name, output) <- outputs do
      try tell(output)
      catch case scala.util.control.NonFatal(e) => log.warn("output {} failed: {}", name, e.toString)

  // ---- control ----

  def planned: Int = settings.fleet.devices
  def target: Int = wanted

  def resize(count: Int, rate: Option[Double] = None, leave: Leave = Leave.Vanish): Either[String, Int] = synchronized {
    if count < 0 || count > planned then
      Left(s"a fleet planned for $planned devices can be resized to 0 to $planned, not $count: start it with --devices $count to go higher")
    else if finishing.isDefined then Left("the run is finishing")
    else
      wanted = count
      devices.resize(count, rate.getOrElse(settings.fleet.rampRate), goodbye = leave == Leave.Cleanly)
      Right(count)
  }

  def act(action: RunAction, name: Option[String] = None): Future[Long] =
    if acted.size >= Device.Switch.MaxActions then
      return Future.failed(IllegalStateException(s"a run takes at most ${Device.Switch.MaxActions} actions, and this one has had them"))
    val embedded = controller.filter(_ => settings.transport.takes(action))
    if embedded.isEmpty && action.onController then
      return Future.failed(IllegalStateException(s"${action.kind} acts on the embedded reference controller${
        if action.dropsSessions then s" and sessions its devices hold (${TransportKinds.dropped(action).fold("")(k => s"--transport ${k.name}")})"
        else " (a run without --controller)"}"))
    val reached = action match
      case RunAction.RestartStopped => devices.restartStopped()
      case RunAction.PowerCut(reach, _) => inFleet(reach)
      case RunAction.RebootWave(share, seed, _, _) => inFleet(Reach(0, Int.MaxValue, Selection.Share(share, seed)))
      case RunAction.Partition(reach, _) => inFleet(reach)
      case RunAction.Flapping(reach, _, _, _) => inFleet(reach)
      case RunAction.Degrade(reach, _, _, _) => inFleet(reach)
      case RunAction.ControllerFault(_, _, _, _) | RunAction.Call(_, _, _) => 0L
      case RunAction.BrokerDrop | RunAction.SshDrop | RunAction.ConfigPush(_) => inFleet(Reach.All)
    val number = synchronized {
      val taken = acted.map(_.name).toSet
      val base = name.getOrElse(action.kind)
      val unique = Iterator.from(2).map(n => s"$base-$n").filterNot(taken).nextOption().filter(_ => taken(base)).getOrElse(base)
      val a = FleetRun.Acted(unique, action.kind, elapsed, action.span, reached)
      acted :+= a
      unmarked.add(ActionMark(a.name, a.kind, a.at.toMillis / 1000.0, a.span.toMillis / 1000.0))
      windows.open(acted.size - 1, a.at.toMillis / 1000.0, a.span.toMillis / 1000.0, if action == RunAction.RestartStopped then 0 else reached) // a restart cuts none
      acted.size - 1
    }
    action match
      case RunAction.RestartStopped => ()
      case RunAction.PowerCut(reach, outage) => cut(reach, outage, number)
      case RunAction.RebootWave(share, seed, over, down) =>
        val steps = over.toSeconds.max(1).toInt
        for step <- 0 until steps do
          val slice = Reach(0, Int.MaxValue, Selection.Slice(share * step / steps, share * (step + 1) / steps, seed))
          system.scheduler.scheduleOnce(over * step / steps, () => if finishing.isEmpty then cut(slice, down, number))
      case RunAction.Partition(reach, lasting) => network(reach, NetworkFault.Partition, lasting, number)
      case RunAction.Degrade(reach, latency, loss, lasting) => network(reach, NetworkFault.Degrade(latency, loss), lasting, number)
      case RunAction.Flapping(reach, every, down, lasting) =>
        devices.switch(affect(reach, number, Device.Affect.Phase.Start))
        val cycles = (lasting.toNanos / every.toNanos).max(1)
        for cycle <- 0L until cycles do
          val at = every * cycle
          system.scheduler.scheduleOnce(at, () => if finishing.isEmpty then devices.network(number, reach, Some(NetworkFault.Partition)))
          system.scheduler.scheduleOnce(at + down, () => if finishing.isEmpty then devices.network(number, reach, None))
        system.scheduler.scheduleOnce(every * (cycles - 1) + down, () =>
          if finishing.isEmpty then devices.switch(affect(reach, number, Device.Affect.Phase.End)))
      case RunAction.ControllerFault(errorRate, throttleRate, latency, lasting) =>
        embedded.foreach(_.inject(Faults(errorRate, latency.toMillis, throttleRate)))
        system.scheduler.scheduleOnce(lasting, () => embedded.foreach(_.inject(Faults())))
      case RunAction.BrokerDrop | RunAction.SshDrop =>
        // Marked, then the moment recoveries are timed from, then the drop: apart, so that the devices hear each before the next.
        devices.switch(affect(Reach.All, number, Device.Affect.Phase.Start))
        system.scheduler.scheduleOnce(100.millis, () => devices.switch(affect(Reach.All, number, Device.Affect.Phase.Moment)))
        system.scheduler.scheduleOnce(120.millis, () => embedded.foreach(_.dropSessions()))
      case RunAction.ConfigPush(by) => // as a drop is, with each device's recovery its applying the new configuration
        devices.switch(affect(Reach.All, number, Device.Affect.Phase.Start).copy(applies = true))
        system.scheduler.scheduleOnce(100.millis, () => devices.switch(affect(Reach.All, number, Device.Affect.Phase.Moment)))
        system.scheduler.scheduleOnce(120.millis, () => by match
          case None => embedded.foreach(_.rollOut())
          case Some(call) => perform(call, number)) // a push that failed leaves the devices unapplied: never back, in the summary
      case RunAction.Call(call, lasting, undo) =>
        perform(call, number)
        undo.foreach(u => system.scheduler.scheduleOnce(lasting, () => if finishing.isEmpty then perform(u, number)))
    Future.successful(reached)

  /** Makes the user's call or command for action `number`; one that failed says so in a line. */
  private def perform(call: fleetsim.control.UserCall, number: Int): Unit =
    call.perform(io).foreach(_.foreach(problem => System.err.println(s"fleetsim: action ${acted(number).name}: $problem")))(using io)

  private def affect(reach: Reach, number: Int, phase: Device.Affect.Phase) = Device.Affect(reach.from, reach.until, reach.among, number, phase)

  /** A fault on the network of the devices `reach` names for `lasting`, as action `number`: they owe it a recovery from its end. */
  private def network(reach: Reach, fault: NetworkFault, lasting: FiniteDuration, number: Int): Unit =
    devices.switch(affect(reach, number, Device.Affect.Phase.Start))
    devices.network(number, reach, Some(fault))
    system.scheduler.scheduleOnce(lasting, () =>
      if finishing.isEmpty then
        devices.network(number, reach, None)
        devices.switch(affect(reach, number, Device.Affect.Phase.End)))

  /** Cuts the power of the devices `reach` names for `outage`, as action `number`. */
  private def cut(reach: Reach, outage: FiniteDuration, number: Int): Unit =
    def switch(on: Boolean) = Device.Power(reach.from, reach.until, on, reach.among, number)
    devices.switch(switch(on = false))
    system.scheduler.scheduleOnce(outage, () => if finishing.isEmpty then devices.switch(switch(on = true)))

  /** Time since the run started. */
  private def elapsed: FiniteDuration = (System.currentTimeMillis() - startedAt.toEpochMilli).millis

  /** How many of the devices in the fleet now an action reaches. */
  private def inFleet(reach: Reach): Long = (reach.from.max(0) until reach.until.min(wanted)).count(reach.among.contains).toLong

  def stop(reason: String): Future[Summary] = finish(reason)

  /** Stops the devices sending, waits for the calls in flight to be answered, folds the figures into
    * a summary judged against the thresholds, tells the outputs (summary.json, report.html,
    * verdict.xml, the console), and stops the devices. Called once per run;
    * later calls get the same summary.
    */
  def finish(stopReason: String): Future[Summary] = synchronized {
    finishing.getOrElse {
      ticker.cancel()
      driver.foreach(_.cancel())
      val done = for
        _ <- devices.quiesce()
        // States and sessions once every device the ramp started has heard the end (quiesced, each keeps
        // its state), before they stop, leave and close their sessions: taken before it, a device
        // started in the last moment joined but was not counted started.
        before <- devices.snapshot()
        cluster = devices.cluster
        _ <- drained(Deadline.now + settings.drainWait)
        snapshot <- devices.snapshot()
      yield
        val summary = Verdict.judged(summaryOf(stopReason, before, snapshot, cluster), settings.thresholds, abortedBy)
        each(_.finish(summary))
        summary
      // The results are written before the devices stop: stopping tens of thousands of sessions over
      // a cluster can outlast the shutdown's time for this phase, and results must not be lost.
      val closed = for
        summary <- done
        _ <- devices.stop()
        _ <- devices.close()
        _ <- controller.fold(Future.successful(Done))(_.stop())
      yield summary
      finishing = Some(closed)
      ended.completeWith(done)
      closed
    }
  }

  /** The run's figures as a summary: `before` taken before the devices stopped (their states and
    * sessions), `snapshot` after. The same at the end and, for the thresholds that abort, every second.
    */
  private def summaryOf(stopReason: String, before: MetricsSnapshot, snapshot: MetricsSnapshot, cluster: Option[fleetsim.report.ClusterSummary]): Summary =
    val ended = Instant.now
    val info = RunInfo(startedAt.toString, ended.toString, (ended.toEpochMilli - startedAt.toEpochMilli) / 1000.0,
      stopReason, controllerUrl, controller.isDefined, settings.transport.name, settings.profile.name, settings.seed,
      settings.scenario.map(_._1.file.toString))
    val actions = acted.zipWithIndex.map { (a, number) =>
      val atS = a.at.toMillis / 1000.0
      // A wave over 5 min in a run of one acted until the run ended, not for its planned span.
      val forS = (a.span.toMillis / 1000.0).min(info.durationS - atS).max(0)
      ActionSummary.of(a.name, a.kind, atS, forS, a.reached,
        snapshot.actions.getOrElse(number, ActionSnapshot(0, Times.empty)), windows.of(number))
    }
    Summary.of(info, settings.fleet.devices, before.byState, Option.when(devices.sessions)(before.tunnels.up), snapshot,
      process.sample(), controller.map(_.counts), cluster, settings.transport, settings.profile.kinds.filter(_.periodic).map(_.key))
      .copy(actions = actions.toList)

  /** The thresholds that abort the run when they fail ([[fleetsim.report.Threshold.abortsFrom]]). */
  private val aborting = settings.thresholds.filter(_.abortsFrom.isDefined)
  /** The one that did, and why: failed in the verdict whatever its figure is at the end. */
  @volatile private var abortedBy: Option[(fleetsim.report.Threshold, Double, String)] = None

  /** Stops the run, as a failed verdict, the first second a threshold that aborts fails on a value (a
    * figure with no value yet — nothing measured — waits), from the time into the run it aborts from.
    */
  private def judgeOnTheWay(snapshot: MetricsSnapshot): Unit =
    val into = (Instant.now.toEpochMilli - startedAt.toEpochMilli).millis
    val judged = aborting.filter(_.abortsFrom.exists(_ <= into))
    if judged.nonEmpty && finishing.isEmpty then
      val now = summaryOf("running", snapshot, snapshot, devices.cluster)
      judged.iterator.flatMap(t => t.figure.read(now).toOption.filterNot(t.holds).map(t -> _)).nextOption().foreach { (t, value) =>
        val why = f"${t.figure.name} was ${t.figure.measure.show(value)} at ${now.run.durationS}%.0f s, not ${t.comparison.symbol} ${t.figure.measure.show(t.bound)}: the run aborted"
        abortedBy = Some((t, value, why))
        stop(s"aborted: ${t.text} failed")
      }

  /** Stops waiting for the calls in flight (Ctrl-C a second time): the summary counts them failed, interrupted. */
  def hurry(): Unit = hurried = true

  /** Every call sent has been answered or has timed out, so sent = ok + forbidden + failed. */
  private def drained(deadline: Deadline): Future[Done] =
    devices.inFlight().flatMap { n =>
      if n == 0 || deadline.isOverdue() || hurried then Future.successful(Done)
      else after(10.millis)(drained(deadline))
    }

object FleetRun:
  /** An action the run started: its name, its kind, when (since the run started), for how long, and how many devices it reached then. */
  private final case class Acted(name: String, kind: String, at: FiniteDuration, span: FiniteDuration, reached: Long)

  /** Puts a run's devices somewhere once the controller is up: `url` is what they call (the
    * controller, or for MQTT the broker), `registry` where their meters go.
    */
  type Placement = (Uri, Option[Controller], io.micrometer.core.instrument.MeterRegistry) => Future[FleetDevices]

  /** A run with its devices in this process; `console` prints its start, status line and summary. */
  def start(settings: RunSettings, console: Option[PrintStream] = None)(using system: ActorSystem[SpawnProtocol.Command]): Future[FleetRun] =
    start(settings, inProcess(settings), console)

  /** A run with its devices where `place` puts them. */
  def start(settings: RunSettings, place: Placement, console: Option[PrintStream])(using system: ActorSystem[SpawnProtocol.Command]): Future[FleetRun] =
    given ExecutionContext = system.executionContext
    Files.createDirectories(settings.resultsDir)
    Files.writeString(settings.resultsDir.resolve(Report.ConfigFile), settings.described)
    val exporters = Exporters(prometheus = settings.dashboard.enabled, statsd = settings.statsd)
    system.whenTerminated.foreach(_ => exporters.close()) // /metrics answers until the very end
    val embedded =
      if !settings.embedded then Future.successful(None)
      else settings.transport.embed(settings.controller).map(Some(_))
    val control = Promise[RunControl]() // the dashboard starts before the run it controls
    val outputs = Outputs.make(Outputs.Wiring(settings, exporters.prometheus, control.future, console))
    val started = for
      controller <- embedded
      made <- outputs
      // MQTT devices call the broker; the others the controller.
      url = Uri(settings.transport.url(settings, controller))
      _ = controller.foreach(c => exporters.bindController(() => c.counts))
      placed <- place(url, controller, exporters.registry)
    yield FleetRun(settings, placed, controller, fleetsim.Redact.urls(url.toString), made, Instant.now)
    control.completeWith(started)
    started

  private def inProcess(settings: RunSettings)(using system: ActorSystem[SpawnProtocol.Command]): Placement = (url, controller, registry) =>
    given ExecutionContext = system.executionContext
    val parts = FleetParts(settings, url, controller.flatMap(_.tls).map(_.authority), registry, settings.fleet.devices)
    system.ask[ActorRef[Fleet.Command]](SpawnProtocol.Spawn(Fleet(settings.fleet, parts.device, settings.startsWith), "fleet", Props.empty, _))(using
      Timeout(10.seconds), system.scheduler).map(LocalDevices(parts, _))
