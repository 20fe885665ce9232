package fleetsim.e2e

import java.nio.file.Path

/** How the tests start fleetsim's entry point in a JVM of its own: a child lives for seconds or a
  * few minutes, and on two cores the C2 compiler would take half its CPU from the processes under
  * test (a 4 s run of 200 devices: 6.4 s of CPU with C2, 3.4 s with C1 alone, here). The code run is
  * the same; how fast it runs once compiled is for bench/, which runs the jar with the launcher's settings.
  */
object ChildJvm:
  val java: String = Path.of(System.getProperty("java.home"), "bin", "java").toString

  /** Options every child JVM of the tests takes, before its own. */
  val Options: Seq[String] = Seq("-XX:TieredStopAtLevel=1")

  /** `java -Xmx<heap> [options] -cp <classpath> fleetsim.cli.Main args...`, with the tests' class path unless told.
    *
    * @param niceness above 0, the child runs under `nice -n niceness`: it takes the CPU the processes
    * of normal priority leave, so a suite of many JVMs cannot starve the suite running beside it
    */
  def command(heap: String, args: Seq[String], options: Seq[String] = Nil, classpath: String = System.getProperty("java.class.path"),
      niceness: Int = 0): Seq[String] =
    val nice = if niceness > 0 then Seq("nice", "-n", niceness.toString) else Nil
    nice ++ Seq(java, s"-Xmx$heap") ++ Options ++ options ++ Seq("-cp", classpath, "fleetsim.cli.Main") ++ args
