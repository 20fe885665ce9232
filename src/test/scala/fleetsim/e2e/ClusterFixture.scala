package fleetsim.e2e

import fleetsim.report.Summary
import fleetsim.web.Browser
import org.openqa.selenium.By
import org.openqa.selenium.support.ui.WebDriverWait
import org.scalatest.concurrent.Eventually
import org.scalatest.time.{Millis, Seconds, Span}
import org.scalatest.wordspec.AnyWordSpec

import java.nio.file.{Files, Path}
import java.util.concurrent.TimeUnit
import scala.jdk.CollectionConverters.*

/** What the cluster specs share: fleets over clusters of `fleetsim node`s, each a JVM of its own on
  * loopback, run by `fleetsim run --cluster` in another JVM, as a user starts them. Two specs, so
  * that the suite's two test JVMs can share their minutes.
  */
abstract class ClusterFixture extends AnyWordSpec with Eventually:
  /** A child JVM running fleetsim; its output lines are kept for the test to wait on. Up to seven of
    * them at once (three nodes, the runner, a controller, two gateways), at a lower priority than
    * other processes: on two cores, beside another suite, they took its CPU long enough that its
    * calls timed out (2 s); they take what it leaves, and it is mostly waiting.
    */
  protected final class Child(heap: String, val args: String*):
    val process: Process = ProcessBuilder(ChildJvm.command(heap, args, niceness = 10).asJava)
      .redirectErrorStream(true).start()
    private val out = Output(process.getInputStream)
    def output: String = out.text
    def awaitLine(text: String, seconds: Int = 60): String = out.await(text, seconds)

    def exit(seconds: Int): Int =
      assert(process.waitFor(seconds, TimeUnit.SECONDS), s"did not exit within $seconds s; output:\n$output")
      process.exitValue

  protected val children = scala.collection.mutable.ListBuffer.empty[Child]
  protected def child(args: String*): Child = withHeap("384m", args*)
  protected def withHeap(heap: String, args: String*): Child = { val c = Child(heap, args*); children += c; c }
  /** Each test's JVMs die with it, pass or fail, so a failed test's nodes cannot starve the next. */
  override def withFixture(test: NoArgTest) =
    try super.withFixture(test)
    finally
      children.foreach(_.process.destroyForcibly())
      children.foreach(_.process.waitFor(30, TimeUnit.SECONDS))
      children.clear()

  /** Devices that backed off during the cold start (a new JVM's first seconds refuse calls as
    * overloaded) retry within 3 s, so the test's deadlines hold.
    */
  protected lazy val quickBackoff: String =
    val file = Files.createTempFile("fleetsim-cluster", ".conf")
    Files.writeString(file, "fleetsim.device.backoff.max = 3s\n")
    file.toString

  /** Three nodes joined through the first. */
  protected def cluster(heap: String = "384m"): (Int, Seq[Child]) =
    val ports = Seq.fill(3)(freePort())
    val nodes = ports.map(p => withHeap(heap, "node", "--cluster-port", p.toString, "--seed-nodes", s"127.0.0.1:${ports.head}"))
    nodes.foreach(_.awaitLine("fleetsim: node", seconds = 120))
    (ports.head, nodes)

  protected def fleetOver(seed: Int, more: String*): (Child, Path) =
    val results = Files.createTempDirectory("fleetsim-cluster")
    val run = child(Seq("run", "--config", quickBackoff, "--cluster", s"127.0.0.1:$seed", "--cluster-nodes", "3", "--devices", "3000",
      "--ramp-rate", "600", "--heartbeat-interval", "2s", "--stats-interval", "3s", "--results", results.toString) ++
      (if more.isEmpty then Seq("--dashboard", "off") else more)*)
    run.awaitLine("3000 http devices against", seconds = 150)
    (run, results)

  /** Stops the run as Ctrl-C does, and reads the summary it writes on the way out. */
  protected def stop(run: Child, results: Path): Summary =
    signal("TERM", run)
    run.exit(180)
    val file = results.resolve(Summary.FileName)
    assert(Files.exists(file), s"no summary.json; the run's output ended:\n${run.output.takeRight(4000)}")
    val summary = Summary.read(file)
    assert(summary.run.stopReason == "interrupted", run.output)
    summary

  /** Every call the devices counted delivered reached the controller, and the controller received no
    * call the devices did not send. Between the two: calls that timed out at the device after the
    * controller took them (four JVMs starting on two cores, a handshake storm), counted failed.
    */
  protected def reconciles(messages: Map[String, fleetsim.report.MessageCounts], received: Map[String, Long]): Unit =
    for (kind, m) <- messages do
      assert(m.ok <= received(kind) && received(kind) <= m.ok + m.failed,
        s"$kind: ${m.ok} delivered, ${m.failed} failed, ${received(kind)} received")

  /** The run's latest sample, from its time-series file. */
  protected def latest(results: Path): Option[fleetsim.metrics.Sample] =
    val file = results.resolve("timeseries.jsonl")
    if !Files.exists(file) then None
    else Files.readAllLines(file).asScala.filter(_.nonEmpty).lastOption.map(com.github.plokhotnyuk.jsoniter_scala.core.readFromString[fleetsim.metrics.Sample](_))

  protected def reporting(results: Path): Long = latest(results).fold(0L)(_.devices.getOrElse("Reporting", 0L))

  protected def signal(name: String, child: Child): Unit =
    assert(ProcessBuilder("kill", s"-$name", child.process.pid.toString).start().waitFor() == 0)

  /** Waits until `devices` are Reporting; if they are not, fails with what the fleet was doing and what the run printed. */
  protected def awaitReporting(results: Path, devices: Long, within: Int): Unit =
    val waited = System.nanoTime()
    try eventually(timeout(Span(within, Seconds)), interval(Span(200, Millis)))(assert(reporting(results) == devices))
    catch case e: org.scalatest.exceptions.TestFailedDueToTimeoutException =>
      val last = latest(results)
      val (runs, others) = children.partition(_.args.headOption.contains("run"))
      fail(s"${reporting(results)} of $devices Reporting after $within s; devices by state ${last.map(_.devices)}, by node ${last.map(_.nodes)}, " +
        s"errors ${last.map(_.errors)}, rates ${last.map(_.rates)}; the run's output ended:\n${runs.map(_.output.takeRight(3000)).mkString}" +
        others.map(c => s"\n--- ${c.args.take(3).mkString(" ")}, exited: ${!c.process.isAlive}; its output ended:\n${c.output.takeRight(1500)}").mkString, e)
    info(f"$devices Reporting ${(System.nanoTime() - waited) / 1e9}%.1f s into the wait")

  /** Waits until the run's devices are all on `nodes` nodes: a lost node's block started again on the others. */
  protected def awaitSpread(results: Path, nodes: Int, within: Int): Unit =
    eventually(timeout(Span(within, Seconds)), interval(Span(200, Millis))) {
      val spread = latest(results).fold(Map.empty[String, Long])(_.nodes)
      assert(spread.size == nodes && spread.values.sum == 3000, spread)
    }

  protected def awaitFewer(results: Path, devices: Long, within: Int): Unit =
    eventually(timeout(Span(within, Seconds)), interval(Span(200, Millis)))(assert(reporting(results) < devices, "the lost node's devices were still counted"))
