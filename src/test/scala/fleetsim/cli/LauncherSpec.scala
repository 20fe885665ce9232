package fleetsim.cli

import org.scalatest.wordspec.AnyWordSpec

import java.nio.file.attribute.PosixFilePermissions
import java.nio.file.{Files, Path}
import java.util.concurrent.TimeUnit
import scala.jdk.CollectionConverters.*

/** The launcher (`./fleetsim`) as a shell script: the JVM options it hands `java`, read from a stand-in
  * `java` on the PATH that prints them (a unit test of the script; CliSpec runs the real JVM).
  */
class LauncherSpec extends AnyWordSpec:

  /** The arguments `./fleetsim args` gives `java`, with JAVA_OPTS set to `javaOpts`. */
  private def javaArguments(javaOpts: String, args: String*): Seq[String] =
    val bin = Files.createTempDirectory("fleetsim-launcher")
    val java = bin.resolve("java")
    Files.writeString(java, "#!/bin/sh\nfor a in \"$@\"; do echo \"$a\"; done\n")
    Files.setPosixFilePermissions(java, PosixFilePermissions.fromString("rwxr-xr-x"))
    val builder = ProcessBuilder((Seq("bash", "fleetsim") ++ args).asJava).redirectErrorStream(true)
    builder.environment.put("PATH", s"$bin:${System.getenv("PATH")}")
    builder.environment.put("FLEETSIM_JAR", bin.resolve("fleetsim.jar").toString) // a given build: no mvn
    builder.environment.put("JAVA_OPTS", javaOpts)
    val p = builder.start()
    val out = String(p.getInputStream.readAllBytes())
    assert(p.waitFor(30, TimeUnit.SECONDS) && p.exitValue == 0, out)
    out.linesIterator.toSeq

  "./fleetsim run" should {
    "size the heap for the fleet and collect it with G1 at 50 ms pauses, marking from a fixed 60% of it" in {
      val args = javaArguments("", "run", "--devices", "100000")
      assert(args.contains("-Xmx446m") && args.contains("-XX:+UseG1GC") && args.contains("-XX:MaxGCPauseMillis=50"), args)
      assert(args.containsSlice(fixedMarkingStart), args)
      assert(args.takeRight(5) == Seq("-jar", args(args.size - 4), "run", "--devices", "100000"), args)
    }

    "use the collector JAVA_OPTS names instead of G1, which the JVM would refuse beside it" in {
      val args = javaArguments("-XX:+UseParallelGC", "run", "--devices", "100000")
      assert(args.contains("-XX:+UseParallelGC") && args.contains("-Xmx446m"), args)
      assert(!args.exists(_.startsWith("-XX:+UseG1GC")) && !args.exists(_.startsWith("-XX:MaxGCPauseMillis")), args)
      assert(!args.exists(fixedMarkingStart.contains), args)
    }

    "leave the heap to JAVA_OPTS when it sets -Xmx, and still collect with G1" in {
      val args = javaArguments("-Xmx3g -XX:+UseCompressedOops -XX:+PrintGC", "run", "--devices", "100000")
      assert(args.contains("-Xmx3g") && !args.exists(a => a.startsWith("-Xmx") && a != "-Xmx3g"), args)
      assert(args.contains("-XX:+UseG1GC") && args.contains("-XX:MaxGCPauseMillis=50"), args)
      assert(!args.exists(fixedMarkingStart.contains), args) // a heap it did not size: G1's adaptive start
    }
  }

  private val fixedMarkingStart = Seq("-XX:-G1UseAdaptiveIHOP", "-XX:InitiatingHeapOccupancyPercent=60")
