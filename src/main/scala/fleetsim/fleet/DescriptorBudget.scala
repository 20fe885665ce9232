package fleetsim.fleet

/** Open files a fleet needs, checked against the process limit before anything starts: the seed's
  * simulator found "Too many open files" only after it had started.
  */
object DescriptorBudget:
  /** Descriptors the JVM holds before any device connects: jars, selectors, pipes, the console. */
  val Base = 150

  /** @param connections client connections the fleet may hold open at once
    * @param embeddedController the server ends of those connections live in this process too
    */
  def check(connections: Int, embeddedController: Boolean, limit: Option[Long]): Either[String, Long] =
    val perConnection = if embeddedController then 2 else 1
    val needed = Base + connections.toLong * perConnection
    limit match
      case Some(max) if needed > max =>
        val split = if embeddedController then "run the controller in its own process (./fleetsim controller) and point --controller at it, " else ""
        Left(
          s"this fleet needs about $needed open files ($connections connections x $perConnection + $Base for the JVM) " +
            s"but this process may open only $max (ulimit -n): ${split}lower --max-connections, or raise the limit")
      case _ => Right(needed)
