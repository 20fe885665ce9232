package fleetsim.fleet

/** Open files a fleet needs, checked against the process limit before anything starts: the seed's
  * simulator found "Too many open files" only after it had started.
  */
object DescriptorBudget:
  /** Descriptors the JVM holds before any device connects: jars, selectors, pipes, the console. */
  val Base = 150

  /** @param connections HTTP connections the fleet may hold open at once
    * @param tunnels sessions the fleet holds open at once (one per device), 0 without
    * @param sessionKind what those sessions are: "SSH tunnels", "MQTT connections"
    * @param embeddedController the server ends of all those sockets live in this process too
    */
  def check(connections: Int, tunnels: Int, embeddedController: Boolean, limit: Option[Long], sessionKind: String = "SSH tunnels"): Either[String, Long] =
    val ends = if embeddedController then 2 else 1
    val sockets = connections.toLong + tunnels
    val needed = Base + sockets * ends
    limit match
      case Some(max) if needed > max =>
        val parts = Seq(
          Option.when(connections > 0)(s"$connections HTTP connections"),
          Option.when(tunnels > 0)(s"$tunnels $sessionKind")).flatten.mkString(" + ")
        val split =
          if embeddedController && sessionKind.startsWith("MQTT") then "run a broker in its own process (./fleetsim controller --mqtt) and point --broker at it, "
          else if embeddedController then "run the controller in its own process (./fleetsim controller) and point --controller at it, "
          else ""
        val spread = if tunnels > 0 then "spread the fleet over several processes, " else ""
        Left(
          s"this fleet needs about $needed open files (($parts) x $ends ${if ends == 2 then "ends" else "end"} + $Base for the JVM) " +
            s"but this process may open only $max (ulimit -n): ${split}${spread}lower --max-connections, or raise the limit")
      case _ => Right(needed)

  /** A cluster run's own process, whose embedded controller (or broker) holds the server end of
    * every device's session while the devices are on the nodes.
    */
  def checkServer(connections: Int, sessions: Int, sessionKind: String, limit: Option[Long]): Either[String, Long] =
    val needed = Base + connections.toLong + sessions
    limit match
      case Some(max) if needed > max =>
        val mqtt = sessionKind.startsWith("MQTT")
        val ends = Seq(Option.when(sessions > 0)(s"$sessions $sessionKind"), Option.when(connections > 0)(s"$connections HTTP connections")).flatten
        Left(s"the ${if mqtt then "broker" else "controller"} embedded in this run would hold the server end of ${ends.mkString(" + ")}, " +
          s"about $needed open files, but this process may open only $max (ulimit -n): " +
          s"${if mqtt then "point --broker at a broker" else "point --controller at a controller"} that can hold them, lower --devices, or raise the limit")
      case _ => Right(needed)
