package fleetsim.metrics


import fleetsim.protocol.ApiCall
import io.micrometer.core.instrument.binder.jvm.{JvmGcMetrics, JvmMemoryMetrics, JvmThreadMetrics}
import io.micrometer.core.instrument.binder.system.{FileDescriptorMetrics, ProcessorMetrics, UptimeMetrics}
import io.micrometer.core.instrument.composite.CompositeMeterRegistry
import io.micrometer.prometheusmetrics.{PrometheusConfig, PrometheusMeterRegistry}
import io.micrometer.statsd.{StatsdConfig, StatsdFlavor, StatsdMeterRegistry}

/** Where the figures go besides the summary: Prometheus (scraped from the dashboard's /metrics)
  * and StatsD (pushed), each optional. With neither, the registry is an empty composite and
  * metering costs next to nothing.
  */
final class Exporters private (val prometheus: Option[PrometheusMeterRegistry], statsd: Option[StatsdMeterRegistry]):
  val registry: CompositeMeterRegistry = CompositeMeterRegistry()
  (prometheus ++ statsd).foreach(registry.add)
  if prometheus.nonEmpty || statsd.nonEmpty then
    Seq(JvmThreadMetrics(), JvmMemoryMetrics(), JvmGcMetrics(), ProcessorMetrics(), FileDescriptorMetrics(), UptimeMetrics())
      .foreach(_.bindTo(registry))

  /** Meters hold their sources weakly: these are held here, for as long as the exporters live. */
  @volatile private var sources = List.empty[AnyRef]

  /** The embedded reference controller's own tallies, in the same registry. */
  def bindController(counts: () => ControllerCounts): Unit =
    sources ::= counts
    for kind <- ApiCall.values.map(_.key) do
      Meters.ControllerReceived.counter(registry, counts, _().received(kind).toDouble, kind)
      Meters.ControllerTunnelled.counter(registry, counts, _().tunnelled(kind).toDouble, kind)
    Meters.ControllerDevices.gauge(registry, counts, _().registered.toDouble)
    Meters.ControllerSshSessions.gauge(registry, counts, _().sshSessions.toDouble)

  def close(): Unit = registry.close()

object Exporters:
  /** @param statsd HOST:PORT of a StatsD agent (Etsy flavour: what Graphite's statsd speaks) */
  def apply(prometheus: Boolean, statsd: Option[(String, Int)]): Exporters =
    new Exporters(
      Option.when(prometheus)(PrometheusMeterRegistry(PrometheusConfig.DEFAULT)),
      statsd.map { (agentHost, agentPort) =>
        val config = new StatsdConfig:
          def get(key: String): String = null
          override def flavor = StatsdFlavor.ETSY
          override def host = agentHost
          override def port = agentPort
          override def step = java.time.Duration.ofSeconds(1)
          override def pollingFrequency = java.time.Duration.ofSeconds(1) // gauges and counters read once a second
        StatsdMeterRegistry(config, io.micrometer.core.instrument.Clock.SYSTEM)
      })
