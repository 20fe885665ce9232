package fleetsim.controller

import io.moquette.broker.Server
import io.moquette.broker.config.MemoryConfig
import io.moquette.interception.AbstractInterceptHandler
import io.moquette.interception.messages.{InterceptConnectMessage, InterceptPublishMessage}
import io.netty.buffer.Unpooled
import io.netty.handler.codec.mqtt.{MqttMessageBuilders, MqttQoS}

import java.net.ServerSocket
import java.nio.charset.StandardCharsets.UTF_8
import java.util.Properties
import java.util.concurrent.ConcurrentHashMap
import scala.jdk.CollectionConverters.*

/** The reference controller's MQTT side: a Moquette broker in the same process, on 127.0.0.1 and
  * in memory only. The controller sees every publish the broker takes (an interceptor, not a
  * subscriber client), counts it in the registry by its topic's last level (`devices/ID/telemetry`
  * counts as telemetry: the profile names topics after its message kinds), and pushes
  * configuration by publishing to the devices' topics itself.
  *
  * @param port 0 picks a free port
  */
final class MqttBroker private (server: Server, val port: Int, registry: Registry):
  def url: String = s"mqtt://127.0.0.1:$port"

  /** Client ids connected so far (the registry keeps the devices of HTTP profiles; these are MQTT's). */
  private val clients = ConcurrentHashMap.newKeySet[String]()

  private[controller] val interceptor = new AbstractInterceptHandler:
    def getID: String = "fleetsim-controller"
    override def onConnect(message: InterceptConnectMessage): Unit = clients.add(message.getClientID)
    override def onPublish(message: InterceptPublishMessage): Unit =
      try if message.getClientID != MqttBroker.Pusher then registry.countReceived(MqttBroker.kindOf(message.getTopicName))
      finally super.onPublish(message) // releases the payload
    override def onSessionLoopError(error: Throwable): Unit = MqttBroker.log.warn("MQTT broker: {}", error.toString)

  def connectedClients: Int = clients.size

  /** Publishes `payload` at QoS 1 to `topic`, as the controller; routed like any publish. */
  def publish(topic: String, payload: String): Unit =
    val message = MqttMessageBuilders.publish().topicName(topic).qos(MqttQoS.AT_LEAST_ONCE).retained(false)
      .payload(Unpooled.wrappedBuffer(payload.getBytes(UTF_8))).build()
    server.internalPublish(message, MqttBroker.Pusher)

  /** Pushes `payload` to every device that has connected, each on its own topic (`devices/ID/config`). */
  def pushEach(payload: String): Int =
    val ids = clients.asScala.toSeq
    ids.foreach(id => publish(s"devices/$id/config", payload))
    ids.size

  def stop(): Unit = server.stopServer()

object MqttBroker:
  private val log = org.slf4j.LoggerFactory.getLogger(classOf[MqttBroker])
  /** The client id the controller's own publishes carry, so that they are not counted as received. */
  private val Pusher = "fleetsim-controller"
  /** The topic every device of the built-in MQTT profile also subscribes to: one push for the fleet. */
  val FleetTopic = "fleet/config"

  def kindOf(topic: String): String = topic.substring(topic.lastIndexOf('/') + 1)

  /** Starts the broker on 127.0.0.1:`port` (0: a free one), anonymous clients allowed, nothing persisted. */
  def start(host: String, port: Int, registry: Registry): MqttBroker =
    val bound = if port != 0 then port else { val s = ServerSocket(0, 1, java.net.InetAddress.getByName(host)); try s.getLocalPort finally s.close() }
    val properties = Properties()
    properties.setProperty("host", host)
    properties.setProperty("port", bound.toString)
    properties.setProperty("websocket_port", "disabled")
    properties.setProperty("persistence_enabled", "false")
    properties.setProperty("allow_anonymous", "true")
    properties.setProperty("telemetry_enabled", "false") // it would call home: tests and benchmarks stay on loopback
    properties.setProperty("netty.native", "false")
    properties.setProperty("intercept.thread_pool.size", "1")
    val server = Server()
    val broker = new MqttBroker(server, bound, registry)
    try server.startServer(MemoryConfig(properties), java.util.List.of(broker.interceptor), null, null, null)
    catch case _: java.io.IOException => throw fleetsim.PortInUse(bound, "mqtt")
    broker
