package fleetsim.e2e

import fleetsim.cli.{Options, Parsed, RunCommand}
import fleetsim.report.Summary
import fleetsim.run.{FleetRun, RunSettings}
import org.apache.pekko.pattern.after
import org.scalatest.Assertions.fail

import java.nio.file.{Files, Path}
import scala.concurrent.{Await, ExecutionContext, Future}
import scala.concurrent.duration.*
import scala.jdk.CollectionConverters.*

/** Scenarios played as `./fleetsim run --scenario FILE` plays them, in this JVM. */
object ScenarioPlays:
  /** Runs `scenario` with `flags` for its length (or until it stops itself), its results under `dir`; its summary. */
  def play(dir: Path, scenario: Path, flags: String*): (RunSettings, Summary) =
    val args = List("--scenario", scenario.toString, "--dashboard", "off", "--results", Files.createTempDirectory(dir, "run").toString) ++ flags
    val config = Options.parse("run", RunCommand.Flags, args) match
      case Parsed.Settings(c) => c
      case other => fail(s"parsed $other")
    val settings = RunSettings(config)
    var summary: Summary = null
    withSystem(config) {
      val run = Await.result(FleetRun.start(settings), 30.seconds)
      val length = settings.fleet.duration.get
      val ended = after(length)(run.finish("duration reached"))(using summon[org.apache.pekko.actor.typed.ActorSystem[?]].classicSystem)
      summary = Await.result(Future.firstCompletedOf(Seq(run.finished, ended))(using ExecutionContext.parasitic), length + 60.seconds)
    }
    (settings, summary)

  /** `body` given the URL of a reference controller in its own process (heartbeats every 2 s), its state under `dir`. */
  def withController[A](dir: Path)(body: String => A): A =
    val controller = ProcessBuilder(ChildJvm.command("256m", Seq("controller", "--port", "0", "--heartbeat-interval", "2s",
      "--state-dir", Files.createTempDirectory(dir, "state").toString)).asJava).start()
    try
      val banner = java.io.BufferedReader(java.io.InputStreamReader(controller.getInputStream)).readLine()
      body("http://127.0.0.1:\\d+".r.findFirstIn(banner).getOrElse(fail(s"no address in '$banner'")))
    finally controller.destroy()

  /** GET `url`'s body. */
  def get(url: String): String =
    java.net.http.HttpClient.newHttpClient().send(java.net.http.HttpRequest.newBuilder(java.net.URI.create(url)).build(),
      java.net.http.HttpResponse.BodyHandlers.ofString()).body
