package fleetsim.cli

import org.scalatest.wordspec.AnyWordSpec

import java.nio.file.attribute.PosixFilePermissions
import java.nio.file.{Files, Path}
import java.util.concurrent.TimeUnit
import java.util.jar.{Attributes, JarOutputStream, Manifest}
import scala.jdk.CollectionConverters.*

/** The launcher (`./fleetsim`) as a shell script: the JVM options it hands `java`, read from a stand-in
  * `java` on the PATH that prints them (a unit test of the script; CliSpec runs the real JVM). What it
  * asks the run's parser (`launch-facts`, when a file may size the fleet) a real JVM answers.
  */
class LauncherSpec extends AnyWordSpec:

  /** The arguments `./fleetsim args` gives `java`, with JAVA_OPTS set to `javaOpts`, from a JDK whose
    * release file says `jdkVersion`.
    */
  private def javaArguments(javaOpts: String, args: String*): Seq[String] = javaArgumentsOf("17.0.15", javaOpts, args*)

  private def javaArgumentsOf(jdkVersion: String, javaOpts: String, args: String*): Seq[String] =
    val (status, out) = launch(s"${standIn(jdkVersion)}:${System.getenv("PATH")}", javaOpts, args*)
    assert(status == 0, out)
    out.linesIterator.toSeq

  /** The bin folder of a JDK whose release file says `jdkVersion` and whose `java` prints its arguments,
    * but for the launcher's question to the run's parser, which it hands to this machine's JVM.
    */
  private def standIn(jdkVersion: String, knowsFacts: Boolean = true): Path =
    val jdk = Files.createTempDirectory("fleetsim-launcher")
    Files.writeString(jdk.resolve("release"), s"JAVA_VERSION=\"$jdkVersion\"\nJAVA_VERSION_DATE=\"2025-04-15\"\n")
    val bin = Files.createDirectory(jdk.resolve("bin"))
    val java = bin.resolve("java")
    val answer =
      if knowsFacts then
        val parser = fleetsim.e2e.ChildJvm.command("512m", Nil, testClasses = false).map(a => s"'$a'").mkString(" ")
        s"while [ \"$$1\" != launch-facts ]; do shift; done; exec $parser \"$$@\""
      else "echo \"fleetsim: unknown command 'launch-facts'\" >&2; exit 2" // an older build's
    Files.writeString(java, "#!/usr/bin/env bash\n" +
      s"if [[ \" $$* \" == *' launch-facts '* ]]; then $answer; fi\n" +
      "for a in \"$@\"; do echo \"$a\"; done\n")
    Files.setPosixFilePermissions(java, PosixFilePermissions.fromString("rwxr-xr-x"))
    bin

  /** `./fleetsim args` with the PATH and JAVA_OPTS given and a given build (so no mvn): an empty jar,
    * enough for `java -version -jar` to start the JVM: its exit status and output.
    */
  private def launch(path: String, javaOpts: String, args: String*): (Int, String) =
    val jar = Files.createTempDirectory("fleetsim-jar").resolve("fleetsim.jar")
    val manifest = Manifest()
    manifest.getMainAttributes.put(Attributes.Name.MANIFEST_VERSION, "1.0")
    JarOutputStream(Files.newOutputStream(jar), manifest).close()
    val builder = ProcessBuilder((Seq("bash", "fleetsim") ++ args).asJava).redirectErrorStream(true)
    builder.environment.keySet.removeIf(_.startsWith("FLEETSIM_")) // the runner's own settings, not the test's
    builder.environment.put("PATH", path)
    builder.environment.put("FLEETSIM_JAR", jar.toString)
    builder.environment.put("JAVA_OPTS", javaOpts)
    val p = builder.start()
    val out = String(p.getInputStream.readAllBytes())
    assert(p.waitFor(30, TimeUnit.SECONDS), out)
    (p.exitValue, out)

  "./fleetsim run" should {
    "size the heap for the fleet and collect it with G1 at 50 ms pauses, marking from a fixed 60% of it" in {
      val args = javaArguments("", "run", "--devices", "100000")
      assert(args.contains("-Xmx446m") && args.contains("-XX:+UseG1GC") && args.contains("-XX:MaxGCPauseMillis=50"), args)
      assert(args.containsSlice(fixedMarkingStart), args)
      assert(args.takeRight(5) == Seq("-jar", args(args.size - 4), "run", "--devices", "100000"), args)
    }

    "have G1 scan the cards a fleet dirties at its collections instead of refining them as they come, in any heap" in {
      assert(javaArguments("", "run", "--devices", "100000").containsSlice(deferredRefinement))
      assert(javaArguments("-Xmx3g", "run", "--devices", "100000").containsSlice(deferredRefinement))
    }

    "not give a JDK from 20 on the refinement options it no longer has (JDK 23 refuses to start with them)" in {
      val args = javaArgumentsOf("21.0.5", "", "run", "--devices", "100000")
      assert(args.contains("-XX:+UseG1GC") && !args.exists(deferredRefinement.contains), args)
    }

    "give options that this machine's JVM takes: it starts with every one of them" in {
      for fleet <- Seq(Seq("--devices", "100000"), Seq("--transport", "ssh", "--devices", "1000")) do
        val (status, out) = launch(System.getenv("PATH"), "-version", "run" +: fleet*)
        assert(status == 0 && out.contains("version") && !out.contains("Unrecognized"), out)
        assert(!out.contains("CompileCommand"), out) // taken quietly
    }

    "have the JIT compile Netty's event loop within seconds, in every JVM it starts" in {
      for command <- Seq(Seq("run", "--transport", "mqtt"), Seq("run"), Seq("controller", "--port", "0")) do
        assert(javaArguments("", command*).containsSlice(nettyLoop), command)
    }

    "use the collector JAVA_OPTS names instead of G1, which the JVM would refuse beside it" in {
      val args = javaArguments("-XX:+UseParallelGC", "run", "--devices", "100000")
      assert(args.contains("-XX:+UseParallelGC") && args.contains("-Xmx446m"), args)
      assert(!args.exists(_.startsWith("-XX:+UseG1GC")) && !args.exists(_.startsWith("-XX:MaxGCPauseMillis")), args)
      assert(!args.exists(fixedMarkingStart.contains) && !args.exists(deferredRefinement.contains), args)
    }

    "leave the heap to JAVA_OPTS when it sets -Xmx, and still collect with G1" in {
      val args = javaArguments("-Xmx3g -XX:+UseCompressedOops -XX:+PrintGC", "run", "--devices", "100000")
      assert(args.contains("-Xmx3g") && !args.exists(a => a.startsWith("-Xmx") && a != "-Xmx3g"), args)
      assert(args.contains("-XX:+UseG1GC") && args.contains("-XX:MaxGCPauseMillis=50"), args)
      assert(!args.exists(fixedMarkingStart.contains), args) // a heap it did not size: G1's adaptive start
    }
  }

  "./fleetsim run --transport ssh" should {
    "have C2 inline only small compiled methods, unless JAVA_OPTS says otherwise; no other fleet, nor the controller" in {
      for ssh <- Seq(Seq("run", "--transport", "ssh", "--devices", "100"), Seq("run", "--transport=ssh")) do
        assert(javaArguments("", ssh*).contains(smallInlining), ssh)
      for other <- Seq(Seq("run", "--devices", "100"), Seq("run", "--transport", "mqtt"), Seq("controller", "--port", "0")) do
        assert(!javaArguments("", other*).contains(smallInlining), other)
      assert(javaArguments("-Xmx3g", "run", "--transport", "ssh").contains(smallInlining)) // a heap of the user's own
      val overridden = javaArguments("-XX:InlineSmallCode=2500", "run", "--transport", "ssh")
      val ours = overridden.indexOf(smallInlining)
      assert(ours >= 0 && overridden.indexOf("-XX:InlineSmallCode=2500") > ours, overridden) // the JVM takes the last
    }
  }

  "./fleetsim run with a file that sizes the fleet" should {
    "size the heap by what the run's settings come to: a scenario's stages, a device profile's transport, a config's" in {
      val dir = Files.createTempDirectory("fleetsim-launcher-files")
      val scenario = Files.writeString(dir.resolve("big.conf"), "stages = [ { devices = 6000, over = 10s }, { hold = 5s } ]\n")
      val ssh = javaArguments("", "run", "--scenario", scenario.toString, "--transport", "ssh")
      assert(ssh.contains("-Xmx942m") && ssh.contains(smallInlining), ssh) // 6,000 x 60,000 bytes, doubled, + 256 MiB
      val mqtt = javaArguments("", "run", "--device-profile", "iot-mqtt", "--devices", "20000")
      assert(mqtt.contains("-Xmx713m") && !mqtt.contains(smallInlining), mqtt) // an MQTT device's 12,000 bytes
      val config = Files.writeString(dir.resolve("fleet.conf"), "fleetsim.fleet { devices = 6000, transport = ssh }\n")
      assert(javaArguments("", "run", "--config", config.toString).contains("-Xmx942m"))
    }

    "size a build from before it could ask by the flags alone, as benchmarks run older builds" in {
      val scenario = Files.writeString(Files.createTempDirectory("fleetsim-launcher-files").resolve("big.conf"),
        "stages = [ { devices = 6000, over = 10s }, { hold = 5s } ]\n")
      val (status, out) = launch(s"${standIn("17.0.15", knowsFacts = false)}:${System.getenv("PATH")}", "", "run", "--scenario", scenario.toString)
      assert(status == 0 && out.linesIterator.contains("-Xmx256m") && out.contains(scenario.toString) && !out.contains("unknown command"), out)
    }

    "refuse what run would refuse, in its words, before the run's JVM starts" in {
      val missing = Files.createTempDirectory("fleetsim-launcher").resolve("nope.conf")
      val (status, out) = launch(s"${standIn("17.0.15")}:${System.getenv("PATH")}", "", "run", "--scenario", missing.toString)
      assert(status == 2 && out.contains(s"fleetsim: --scenario: no such file '$missing'") && !out.contains("-jar"), out)
    }
  }

  private val smallInlining = "-XX:InlineSmallCode=1000"
  private val nettyLoop = Seq("-XX:CompileCommand=quiet", "-XX:CompileCommand=CompileThresholdScaling,io.netty.channel.nio.NioEventLoop::run,0.01")
  private val fixedMarkingStart = Seq("-XX:-G1UseAdaptiveIHOP", "-XX:InitiatingHeapOccupancyPercent=60")
  private val deferredRefinement = Seq("-XX:-G1UseAdaptiveConcRefinement", "-XX:G1ConcRefinementGreenZone=8192",
    "-XX:G1ConcRefinementYellowZone=12288", "-XX:G1ConcRefinementRedZone=16384")
