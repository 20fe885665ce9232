package fleetsim.metrics

import io.micrometer.core.instrument.{FunctionCounter, Gauge, MeterRegistry, Timer}

import java.time.Duration

/** Every meter a run exports, named once: the fleet in one process ([[FleetMetrics]]), a cluster's
  * nodes as the runner exports them ([[fleetsim.cluster.NodeMeters]]) and the reference
  * controller's tallies ([[Exporters]]) register these names, descriptions and tags, so `/metrics`
  * and StatsD carry the same series wherever the devices run. Prometheus shows `fleetsim.a.b` as
  * `fleetsim_a_b`, with `_total` on counters and `_seconds` on timers.
  */
object Meters:
  /** A meter's name and description; `tags` are the keys its series are told apart by. */
  final case class Meter(name: String, help: String, tags: String*):
    /** A counter that reads its count from `source` when scraped. */
    def counter[A](registry: MeterRegistry, source: A, count: A => Double, values: String*): Unit =
      tagged(FunctionCounter.builder(name, source, a => count(a)), values)((b, k, v) => b.tag(k, v)).description(help).register(registry)

    /** A gauge that reads its value from `source` when scraped. */
    def gauge[A](registry: MeterRegistry, source: A, value: A => Double, values: String*): Unit =
      tagged(Gauge.builder(name, source, a => value(a)), values)((b, k, v) => b.tag(k, v)).description(help).register(registry)

    /** A timer with fixed buckets, so the number of series is fixed too. */
    def timer(registry: MeterRegistry, values: String*): Timer =
      tagged(Timer.builder(name), values)((b, k, v) => b.tag(k, v)).description(help).serviceLevelObjectives(Buckets*).register(registry)

    /** `values` are this meter's tag values in the order of [[tags]], then any more as key, value pairs (a node's address). */
    private def tagged[B](builder: B, values: Seq[String])(tag: (B, String, String) => B): B =
      require(values.size >= tags.size, s"$name takes tags ${tags.mkString(", ")}")
      val pairs = tags.zip(values) ++ values.drop(tags.size).grouped(2).map(p => p(0) -> p(1))
      pairs.foldLeft(builder)((b, p) => tag(b, p._1, p._2))

  // The devices
  val Devices = Meter("fleetsim.devices", "devices per lifecycle state", "state")
  val Transitions = Meter("fleetsim.transitions", "state transitions", "from", "to")
  val Stopped = Meter("fleetsim.devices.stopped", "devices that stopped themselves, by reason", "reason")
  // Their messages
  val Sent = Meter("fleetsim.messages.sent", "calls sent", "kind")
  val Replies = Meter("fleetsim.messages", "replies by outcome", "kind", "outcome")
  val Latency = Meter("fleetsim.latency", "reply latency", "kind")
  val Lateness = Meter("fleetsim.lateness", "how late scheduled sends left", "kind")
  // Their sessions
  val SessionsOpened = Meter("fleetsim.tunnels.opened", "tunnels opened")
  val SessionsUp = Meter("fleetsim.tunnels.up", "tunnels up")
  val SessionsFailed = Meter("fleetsim.tunnels.failed", "failed tunnel opens", "reason")
  val Handshake = Meter("fleetsim.handshake", "session opening time: SSH handshake (including the wait for a slot), MQTT CONNECT to CONNACK")
  val Pushes = Meter("fleetsim.pushes", "pushes received (messages on the devices' MQTT subscriptions)")
  val PushesAcknowledged = Meter("fleetsim.pushes.acknowledged", "pushes applied and acknowledged")
  val PushToAck = Meter("fleetsim.push.to.ack", "time from a push's arrival to its acknowledgement")
  // The reference controller
  val ControllerReceived = Meter("fleetsim.controller.received", "calls the controller answered 200", "kind")
  val ControllerTunnelled = Meter("fleetsim.controller.tunnelled", "of those, calls that came through an SSH tunnel", "kind")
  val ControllerDevices = Meter("fleetsim.controller.devices", "devices registered with the controller")
  val ControllerSshSessions = Meter("fleetsim.controller.ssh.sessions", "open SSH sessions at the controller")

  /** Histogram buckets for Prometheus: fixed, so the number of series is too. */
  private val Buckets: Seq[Duration] = Seq(1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000).map(Duration.ofMillis(_))
