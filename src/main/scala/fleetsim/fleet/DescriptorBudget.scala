package fleetsim.fleet

/** Open files a fleet needs, checked against the process limit before anything starts: the seed's
  * simulator found "Too many open files" only after it had started.
  */
object DescriptorBudget:
  /** Descriptors the JVM holds before any device connects: jars, selectors, pipes, the console. */
  val Base = 150

  /** The open files a process may use, and what says so: its own limit (`ulimit -n`), or
    * `fleetsim.fleet.max-open-files` where that is lower. The setting only ever lowers the budget:
    * a process cannot open more than its limit, whatever a setting says.
    */
  def limit(process: Option[Long], setting: Option[Long]): (Option[Long], String) = setting match
    case Some(files) if process.forall(files < _) => (Some(files), "fleetsim.fleet.max-open-files")
    case _ => (process, "ulimit -n")

  /** What to raise, in a refusal, when the budget is too small. */
  private def raise(limitName: String) = if limitName == "ulimit -n" then "raise the limit" else s"raise $limitName"

  /** @param connections HTTP connections the fleet may hold open at once
    * @param tunnels sessions the fleet holds open at once (one per device), 0 without
    * @param sessionKind what those sessions are: "SSH tunnels", "MQTT connections"
    * @param embeddedController the server ends of all those sockets live in this process too
    * @param limitName what sets `limit` ([[limit]])
    */
  def check(connections: Int, tunnels: Int, embeddedController: Boolean, limit: Option[Long], sessionKind: String = "SSH tunnels",
      limitName: String = "ulimit -n"): Either[String, Long] =
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
            s"but this process may open only $max ($limitName): ${split}${spread}lower --max-connections, or ${raise(limitName)}")
      case _ => Right(needed)

  /** A cluster run's own process, whose embedded controller (or broker) holds the server end of
    * every device's session while the devices are on the nodes.
    */
  def checkServer(connections: Int, sessions: Int, sessionKind: String, limit: Option[Long], limitName: String = "ulimit -n"): Either[String, Long] =
    val needed = Base + connections.toLong + sessions
    limit match
      case Some(max) if needed > max =>
        val mqtt = sessionKind.startsWith("MQTT")
        val ends = Seq(Option.when(sessions > 0)(s"$sessions $sessionKind"), Option.when(connections > 0)(s"$connections HTTP connections")).flatten
        Left(s"the ${if mqtt then "broker" else "controller"} embedded in this run would hold the server end of ${ends.mkString(" + ")}, " +
          s"about $needed open files, but this process may open only $max ($limitName): " +
          s"${if mqtt then "point --broker at a broker" else "point --controller at a controller"} that can hold them, lower --devices, or ${raise(limitName)}")
      case _ => Right(needed)
