package fleetsim.e2e

import java.io.File
import java.nio.channels.FileChannel
import java.nio.file.{Files, Path, StandardCopyOption, StandardOpenOption}
import java.security.MessageDigest
import java.util.concurrent.TimeUnit
import java.util.jar.{JarEntry, JarOutputStream}
import scala.jdk.CollectionConverters.*
import scala.util.Using

/** How the tests start fleetsim's entry point in a JVM of its own: a child lives for seconds or a
  * few minutes, and on two cores the C2 compiler would take half its CPU from the processes under
  * test (a 4 s run of 200 devices: 6.4 s of CPU with C2, 3.4 s with C1 alone, here). The code run is
  * the same; how fast it runs once compiled is for bench/, which runs the jar with the launcher's settings.
  *
  * The suite starts about 60 children, so their start is shared: they load fleetsim's classes from a
  * class-data archive (AppCDS) dumped once from a short SSH run (a 2 s run of 50 devices: 4.7 s of CPU
  * without it, 3.1 s with it, here). JDK 17 archives only from jars, so the children run fleetsim's
  * classes from a jar of target/classes, as users run them from fleetsim.jar.
  */
object ChildJvm:
  val java: String = Path.of(System.getProperty("java.home"), "bin", "java").toString

  /** Options every child JVM of the tests takes, before its own. */
  val Options: Seq[String] = Seq("-XX:TieredStopAtLevel=1", s"-Djava.io.tmpdir=${System.getProperty("java.io.tmpdir")}") // the suite's, under target/

  /** `java -Xmx<heap> [options] -cp <classpath> fleetsim.cli.Main args...`.
    *
    * @param testClasses whether the tests' classes and resources (logback-test.xml) come after fleetsim's:
    * without them, a child has the class path the jar has
    * @param niceness above 0, the child runs under `nice -n niceness`: it takes the CPU the processes
    * of normal priority leave, so a suite of many JVMs cannot starve the suite running beside it
    */
  def command(heap: String, args: Seq[String], options: Seq[String] = Nil, testClasses: Boolean = true,
      niceness: Int = 0): Seq[String] =
    val nice = if niceness > 0 then Seq("nice", "-n", niceness.toString) else Nil
    val classpath = (Shared.classpath ++ Shared.testClasses.filter(_ => testClasses)).mkString(File.pathSeparator)
    nice ++ Seq(java, s"-Xmx$heap") ++ Options ++ Shared.options ++ options ++ Seq("-cp", classpath, "fleetsim.cli.Main") ++ args

  /** The children's class path and archive, made once for the suite: each test JVM takes the same
    * files under target/child-jvm/, keyed by the classes they hold, and the first to need them makes them.
    */
  private object Shared:
    private val entries = System.getProperty("java.class.path").split(File.pathSeparator).toSeq
    private val classes = entries.find(_.endsWith(s"target${File.separator}classes")).map(Path.of(_))
      .getOrElse(sys.error(s"target/classes is not on the tests' class path: ${entries.mkString(File.pathSeparator)}"))
    val testClasses: Option[String] = entries.find(_.endsWith("test-classes"))
    private val libraries = entries.filterNot(e => e.endsWith("test-classes") || Path.of(e) == classes)

    /** The jar of target/classes, and the archive unless its dump failed. */
    private val (jar, archive): (Path, Option[Path]) =
      val home = classes.resolveSibling("child-jvm")
      Files.createDirectories(home)
      Using.resource(FileChannel.open(home.resolve("lock"), StandardOpenOption.CREATE, StandardOpenOption.WRITE)) { channel =>
        val lock = channel.lock() // the other test JVM waits while one makes them
        try
          val dir = home.resolve(fingerprint(classes))
          val (jar, archive) = (dir.resolve("fleetsim-classes.jar"), dir.resolve("fleetsim.jsa"))
          if !Files.exists(jar) then
            Files.list(home).iterator.asScala.filter(Files.isDirectory(_)).foreach(deleteTree) // an earlier build's
            Files.createDirectories(dir)
            writeJar(classes, jar)
            dump(jar, archive)
          (jar, Option.when(Files.exists(archive))(archive))
        finally lock.release()
      }

    val classpath: Seq[String] = classpathWith(jar)
    /** A child that cannot map the archive runs without it; JDK 17 says so on standard output, where the tests read. */
    val options: Seq[String] = archive.toSeq.flatMap(a => Seq(s"-XX:SharedArchiveFile=$a", "-Xlog:cds=off,cds+dynamic=off"))

    /** The archive maps only with the class path it was dumped with, or one that begins with it. */
    private def classpathWith(jar: Path): Seq[String] = jar.toString +: libraries

    /** Dumps the classes a short SSH run of the reference controller loads; no archive if the run fails. */
    private def dump(jar: Path, archive: Path): Unit =
      val dir = archive.getParent
      val partial = dir.resolve("partial.jsa")
      val classpath = classpathWith(jar).mkString(File.pathSeparator)
      Files.writeString(dir.resolve("classpath.txt"), classpath) // for running a child by hand
      val run = ProcessBuilder((Seq(java, "-Xmx256m") ++ Options ++ Seq(s"-XX:ArchiveClassesAtExit=$partial",
          "-cp", classpath, "fleetsim.cli.Main", "run", "--transport", "ssh",
          "--devices", "50", "--duration", "2s", "--dashboard-port", "0", "--results", dir.resolve("results").toString)).asJava)
        .directory(dir.toFile).redirectErrorStream(true).redirectOutput(dir.resolve("dump.log").toFile).start()
      val ended = run.waitFor(120, TimeUnit.SECONDS)
      if !ended then run.destroyForcibly()
      if ended && run.exitValue == 0 && Files.exists(partial) then Files.move(partial, archive, StandardCopyOption.ATOMIC_MOVE)
      else System.err.println(s"ChildJvm: no class-data archive for the child JVMs (see $dir/dump.log); they start without one")

    /** Names the classes' build: each file's path, size and time. */
    private def fingerprint(classes: Path): String =
      val digest = MessageDigest.getInstance("SHA-256")
      Using.resource(Files.walk(classes)) { files =>
        files.filter(Files.isRegularFile(_)).sorted().forEach { f =>
          digest.update(s"${classes.relativize(f)} ${Files.size(f)} ${Files.getLastModifiedTime(f).toMillis}\n".getBytes)
        }
      }
      digest.digest().take(8).map("%02x".format(_)).mkString

    /** Written aside and moved into place: a test JVM killed while writing it leaves no broken jar behind. */
    private def writeJar(classes: Path, jar: Path): Unit =
      val partial = jar.resolveSibling("partial.jar")
      Using.resources(Files.walk(classes), JarOutputStream(Files.newOutputStream(partial))) { (files, out) =>
        files.sorted().iterator.asScala.filter(_ != classes).foreach { f =>
          val name = classes.relativize(f).iterator.asScala.mkString("/") + (if Files.isDirectory(f) then "/" else "")
          out.putNextEntry(JarEntry(name))
          if Files.isRegularFile(f) then Files.copy(f, out)
          out.closeEntry()
        }
      }
      Files.move(partial, jar, StandardCopyOption.ATOMIC_MOVE)
