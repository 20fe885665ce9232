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

  /** The server a fleet's devices call, as a refusal names it: what it is (`controller`, `broker`),
    * how to run one in a process of its own, and the flag that points the fleet at one. A transport
    * kind says which ([[fleetsim.run.TransportKind.server]]).
    */
  final case class Server(name: String, apart: String, flag: String)

  object Server:
    val Controller: Server = Server("controller", "run the controller in its own process (./fleetsim controller)", "--controller")

  /** What to raise, in a refusal, when the budget is too small. */
  private def raise(limitName: String) = if limitName == "ulimit -n" then "raise the limit" else s"raise $limitName"

  /** @param connections HTTP connections the fleet may hold open at once
    * @param shared those connections are the fleet's shared pool (`--max-connections` sizes it), not one a device
    * @param tunnels sessions the fleet holds open at once (one per device), 0 without
    * @param sessionKind what those sessions are: "SSH tunnels", "MQTT connections"
    * @param embeddedController the server ends of all those sockets live in this process too
    * @param limitName what sets `limit` ([[limit]])
    * @param server the server those sockets end at
    */
  def check(connections: Int, tunnels: Int, embeddedController: Boolean, limit: Option[Long], sessionKind: String = "SSH tunnels",
      limitName: String = "ulimit -n", server: Server = Server.Controller, shared: Boolean = true): Either[String, Long] =
    val ends = if embeddedController then 2 else 1
    val sockets = connections.toLong + tunnels
    val needed = Base + sockets * ends
    limit match
      case Some(max) if needed > max =>
        val parts = Seq(
          Option.when(connections > 0)(s"$connections HTTP connections"),
          Option.when(tunnels > 0)(s"$tunnels $sessionKind")).flatten.mkString(" + ")
        val split = if embeddedController then s"${server.apart} and point ${server.flag} at it, " else ""
        val spread = if tunnels > 0 then "spread the fleet over several processes, " else ""
        // Only a shared pool answers to --max-connections, and only where it is most of the need; a
        // device's own session or connection, to the devices' count.
        val lower = if shared && connections > tunnels then "--max-connections" else "--devices"
        Left(
          s"this fleet needs about $needed open files (($parts) x $ends ${if ends == 2 then "ends" else "end"} + $Base for the JVM) " +
            s"but this process may open only $max ($limitName): ${split}${spread}lower $lower, or ${raise(limitName)}")
      case _ => Right(needed)

  /** A cluster run's own process, whose embedded controller (or broker) holds the server end of
    * every device's session while the devices are on the nodes.
    */
  def checkServer(connections: Int, sessions: Int, sessionKind: String, limit: Option[Long], limitName: String = "ulimit -n",
      server: Server = Server.Controller): Either[String, Long] =
    val needed = Base + connections.toLong + sessions
    limit match
      case Some(max) if needed > max =>
        val ends = Seq(Option.when(sessions > 0)(s"$sessions $sessionKind"), Option.when(connections > 0)(s"$connections HTTP connections")).flatten
        Left(s"the ${server.name} embedded in this run would hold the server end of ${ends.mkString(" + ")}, " +
          s"about $needed open files, but this process may open only $max ($limitName): " +
          s"point ${server.flag} at a ${server.name} that can hold them, lower --devices, or ${raise(limitName)}")
      case _ => Right(needed)
