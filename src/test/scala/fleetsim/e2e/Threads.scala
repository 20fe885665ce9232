package fleetsim.e2e

import org.apache.pekko.actor.typed.ActorSystem

import java.util.concurrent.{ForkJoinPool, ForkJoinWorkerThread}
import scala.jdk.CollectionConverters.*

/** The JVM's threads now, for tests that a fleet's threads do not grow with its devices.
  *
  * Pekko's fork-join dispatchers start a thread only when work finds none idle, up to their
  * parallelism: a small fleet may leave one a few threads short of it, which would read as growth
  * at a larger one. So the threads of `system`'s fork-join pools are held against each pool's own
  * parallelism instead (past it a pool grows only to stand in for blocked threads), and only the
  * others, other systems' of the test JVM among them, are compared between fleets. Pools are told
  * apart by the pool, not by the threads' names: an earlier system of the same name may leave a pool
  * whose idle threads live on for a minute.
  */
final class Threads(system: ActorSystem[?]):
  private val prefix = s"${system.name}-" // Pekko names a system's threads `<system>-<dispatcher>-<n>`
  private val stacks: Map[Thread, Array[StackTraceElement]] = Thread.getAllStackTraces.asScala.toMap
  /** The fork-join pools of systems named as `system` is, with their threads now. */
  private val pools: Map[ForkJoinPool, Seq[ForkJoinWorkerThread]] = stacks.keys.toSeq.collect {
    case t: ForkJoinWorkerThread if t.getName.startsWith(prefix) => t
  }.groupBy(_.getPool)
  private val unpooled: Seq[String] =
    val pooled = pools.values.flatten.toSet[Thread]
    stacks.keys.filterNot(pooled).map(_.getName).toSeq

  /** Threads outside those fork-join pools. */
  val others: Int = unpooled.size

  /** Pools with more threads than their parallelism, by dispatcher: the pool's state, and each of
    * its threads with the top of its stack (a thread blocked in `ForkJoinPool.managedBlock` names
    * the call that blocked it).
    */
  val overCeilings: Map[String, String] = pools.collect {
    case (pool, threads) if threads.size > pool.getParallelism =>
      val name = threads.head.getName.stripPrefix(prefix).replaceFirst("-[0-9]+$", "")
      name -> (s"${threads.size} threads over a parallelism of ${pool.getParallelism}, $pool:" +
        threads.map(t => s"\n  ${t.getName} ${t.getState}" + stacks(t).take(12).map(f => s"\n    at $f").mkString).mkString)
  }

  /** The others by name, digits as `#`, to say what grew. */
  def othersByName: Map[String, Int] = unpooled.groupMapReduce(_.replaceAll("[0-9]+", "#"))(_ => 1)(_ + _)
