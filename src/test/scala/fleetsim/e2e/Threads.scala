package fleetsim.e2e

import org.apache.pekko.actor.typed.ActorSystem

import scala.jdk.CollectionConverters.*

/** The JVM's threads now, for tests that a fleet's threads do not grow with its devices.
  *
  * Pekko's fork-join dispatchers start a thread only when work finds none idle, up to their
  * parallelism: a small fleet may leave one a few threads short of it, which would read as growth
  * at a larger one. So the threads of `system`'s fork-join dispatchers are held against that
  * ceiling instead (past it a pool grows only to stand in for a blocked thread), and only the
  * others, other systems' of the test JVM among them, are compared between fleets.
  */
final class Threads(system: ActorSystem[?]):
  private val config = system.settings.config
  private val names: Seq[String] = Thread.getAllStackTraces.keySet.asScala.toSeq.map(_.getName)
  /** The system's fork-join dispatchers with a thread now: their threads' names and ceiling. */
  private val pools: Map[String, (Seq[String], Int)] =
    names.flatMap(n => dispatcher(n).map(_ -> n)).groupMap(_._1)(_._2).flatMap((id, threads) => ceiling(id).map(c => id -> (threads.sorted, c)))
  private val unpooled = names.filterNot(n => dispatcher(n).exists(pools.contains))

  /** Threads outside Pekko's fork-join dispatchers. */
  val others: Int = unpooled.size

  /** Fork-join dispatchers with more threads than their parallelism: the threads, by name (a gap in
    * their numbers is a thread that ended and was replaced), and the ceiling.
    */
  val overCeilings: Map[String, String] = pools.collect {
    case (id, (threads, ceiling)) if threads.size > ceiling => id -> s"${threads.size} threads over a parallelism of $ceiling: ${threads.mkString(", ")}"
  }

  /** The others by name, digits as `#`, to say what grew. */
  def othersByName: Map[String, Int] = unpooled.groupMapReduce(_.replaceAll("[0-9]+", "#"))(_ => 1)(_ + _)

  /** `e2e-pekko.actor.default-dispatcher-7` → `pekko.actor.default-dispatcher`, for a system named e2e. */
  private def dispatcher(thread: String): Option[String] =
    Option.when(thread.startsWith(s"${system.name}-"))(thread.stripPrefix(s"${system.name}-").replaceFirst("-[0-9]+$", ""))

  /** Pekko's own sizing of a fork-join pool: cores × factor, within min and max. */
  private def ceiling(id: String): Option[Int] =
    val fj = s"$id.fork-join-executor"
    val forkJoin = scala.util.Try(config.hasPath(fj) && config.getString(s"$id.executor") != "thread-pool-executor").getOrElse(false) // not every name is a path
    Option.when(forkJoin) {
      val cores = Runtime.getRuntime.availableProcessors
      math.min(math.max(math.ceil(cores * config.getDouble(s"$fj.parallelism-factor")).toInt, config.getInt(s"$fj.parallelism-min")),
        config.getInt(s"$fj.parallelism-max"))
    }
