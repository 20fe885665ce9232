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

/** How the nodes of a cluster come and go: found by discovery, leaving on SIGTERM, waking after a
  * pause, outliving a killed runner, and refusing a share that cannot fit.
  */
class ClusterNodesSpec extends ClusterFixture:
  "nodes started with --discovery" should {
    "find each other by Cluster Bootstrap, without seed nodes, and carry a run together" in {
      val (ports, management) = (Seq.fill(3)(freePort()), Seq.fill(3)(freePort()))
      val endpoints = management.map(p => s"""{ host = "127.0.0.1", port = $p }""").mkString(", ")
      val discovery = Files.writeString(Files.createTempFile("fleetsim-discovery", ".conf"),
        s"pekko.discovery.config.services.fleetsim-nodes.endpoints = [$endpoints]\n").toString
      val nodes = ports.zip(management).map((p, m) =>
        child("node", "--cluster-port", p.toString, "--discovery", "config", "--management-port", m.toString, "--config", discovery))
      nodes.foreach(_.awaitLine("finding the other nodes of fleetsim-nodes by config discovery", seconds = 120))
      val (run, results) = fleetOver(ports.last)
      awaitReporting(results, 3000, within = 90)
      val spread = stop(run, results).cluster.get
      assert(spread.nodes.size == 3 && spread.nodes.values.forall(_ == 1000), spread)
      // Kubernetes' probes: Pekko Management's health checks on each node.
      val ready = java.net.http.HttpClient.newHttpClient().send(
        java.net.http.HttpRequest.newBuilder(java.net.URI(s"http://127.0.0.1:${management.head}/ready")).build(),
        java.net.http.HttpResponse.BodyHandlers.ofString())
      assert(ready.statusCode == 200, ready.body)
    }
  }

  "a node stopped with SIGTERM" should {
    "hand its devices over to the others before it leaves" in {
      val (seed, nodes) = cluster()
      val (run, results) = fleetOver(seed)
      awaitReporting(results, 3000, within = 60)
      nodes.last.process.destroy() // SIGTERM
      nodes.last.exit(30)
      awaitSpread(results, nodes = 2, within = 20)
      awaitReporting(results, 3000, within = 20)
      val summary = stop(run, results)
      val spread = summary.cluster.get
      assert(spread.nodes.size == 2 && spread.nodes.values.sum == 3000, spread)
      assert(summary.controller.get.duplicates == 0) // a block handed over stops before it starts elsewhere
    }
  }

  "a node whose process was stopped past the cluster's decision" should {
    "hold its devices back when it wakes, so no device calls alongside its re-homed copy" in {
      val (seed, nodes) = cluster()
      val (run, results) = fleetOver(seed)
      awaitReporting(results, 3000, within = 60)
      val frozen = nodes.last
      signal("STOP", frozen) // a paused VM, a long GC: the others down it and start its block again
      awaitSpread(results, nodes = 2, within = 45)
      signal("CONT", frozen) // its devices wake with their sends overdue
      frozen.awaitLine("its devices hold back until it knows it is still a member", seconds = 30)
      frozen.exit(60) // it learns it was downed, and its process ends
      val summary = stop(run, results)
      assert(summary.controller.get.duplicates == 0, frozen.output)
      assert(summary.devices.byState("Reporting") == 3000)
    }
  }

  "the nodes of a run whose runner is killed" should {
    "stop its devices once the cluster has downed the runner" in {
      val (seed, nodes) = cluster()
      val (run, results) = fleetOver(seed)
      awaitReporting(results, 3000, within = 60)
      run.process.destroyForcibly()
      nodes.foreach(_.awaitLine("left the cluster; stopping its devices here", seconds = 60))
    }
  }

  "a node whose share cannot fit" should {
    "refuse the run before it starts, in one line with the numbers" in {
      val port = freePort()
      child("node", "--cluster-port", port.toString).awaitLine("fleetsim: node")
      val run = child("run", "--cluster", s"127.0.0.1:$port", "--devices", "1000000", "--dashboard", "off",
        "--results", Files.createTempDirectory("fleetsim-cluster").toString) // not ./results, where the suites beside it run
      assert(run.exit(60) == 1, run.output)
      val refusal = run.output.linesIterator.find(_.startsWith("fleetsim: node ")).getOrElse(fail(run.output))
      assert(refusal.contains("refused the run") && refusal.contains("heap") && refusal.contains("1000000"), refusal)
      assert(!run.output.contains("\tat "), run.output)
    }
  }

  /** `run --cluster` of 3,000 devices over the three nodes, and its results folder, once the run has
    * placed its devices (four JVMs starting on two cores take from seconds to a minute to get there).
    * It runs until the test [[stop]]s it: a duration would race the test on a slow machine.
    */
