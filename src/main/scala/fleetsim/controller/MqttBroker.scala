package fleetsim.controller

import io.moquette.broker.{IRetainedRepository, Server}
import io.moquette.broker.config.MemoryConfig
import io.moquette.broker.security.IAuthorizatorPolicy
import io.moquette.broker.subscriptions.Topic
import io.moquette.interception.AbstractInterceptHandler
import io.moquette.interception.messages.InterceptConnectMessage
import io.netty.buffer.Unpooled
import io.netty.handler.codec.mqtt.{MqttMessageBuilders, MqttQoS}

import java.nio.charset.StandardCharsets.UTF_8
import java.util.Properties
import java.util.concurrent.ConcurrentHashMap
import scala.jdk.CollectionConverters.*

/** The reference controller's MQTT side: a Moquette broker in the same process, on 127.0.0.1 and
  * in memory only. The controller sees every publish the broker takes (where the broker asks whether
  * it may, not as a subscriber client), counts it in the registry by its topic's last level
  * (`devices/ID/telemetry` counts as telemetry: the profile names topics after its message kinds),
  * and pushes configuration by publishing to the devices' topics itself.
  */
final class MqttBroker private (server: Server, host: String, val port: Int, watcher: MqttBroker.Watcher, retained: IRetainedRepository):
  def url: String = s"mqtt://$host:$port"

  /** Publishes `payload` at QoS 1 to `topic`, as the controller; routed like any publish. Retained, as
    * a device-management service keeps a device's desired configuration: a device that subscribes
    * later (a new one, or one connecting again after its connection was lost) hears the latest push
    * at once, where it would otherwise wait for the next that may never come.
    *
    * Retained before it is routed: Moquette routes a publish to the subscribers it has, then retains
    * it, so a device subscribing in between got neither (one of 200 in MqttEndToEndSpec, once). The
    * other way round, such a device hears the push at least once (a device acts on a configuration
    * newer than its own, so twice does no harm).
    */
  def publish(topic: String, payload: String): Unit =
    val message = MqttMessageBuilders.publish().topicName(topic).qos(MqttQoS.AT_LEAST_ONCE).retained(true)
      .payload(Unpooled.wrappedBuffer(payload.getBytes(UTF_8))).build()
    retained.retain(Topic(topic), message)
    server.internalPublish(message, MqttBroker.Pusher)

  /** Pushes `payload` to every device that has connected, each on its own topic (`devices/ID/config`):
    * those the broker's interceptor has told of, and those connected now, which it may not have told
    * of yet (it runs on a thread of its own, behind the CONNACK).
    */
  def pushEach(payload: String): Int =
    val ids = (watcher.clients.asScala ++ connected).toSeq
    ids.foreach(id => publish(s"devices/$id/config", payload))
    ids.size

  /** Closes every device's connection at once, as a broker failing over would; returns how many. */
  def dropAll(): Int = connected.count(server.disconnectClient)

  /** The devices connected now, as the broker's sessions say. */
  private def connected: Seq[String] =
    server.listConnectedClients().asScala.map(_.getClientID).filter(_ != MqttBroker.Pusher).toSeq

  def stop(): Unit = server.stopServer()

object MqttBroker:
  private val log = org.slf4j.LoggerFactory.getLogger(classOf[MqttBroker])
  /** The client id the controller's own publishes carry, so that they are not counted as received. */
  private val Pusher = "fleetsim-controller"
  /** The topic every device of the built-in MQTT profile also subscribes to: one push for the fleet. */
  val FleetTopic = "fleet/config"

  /** A push of configuration `seq`, naming where its document is on the controller at `base` (scheme://host:port). */
  def configPush(seq: Long, base: String): String = s"""{"configSeq":$seq,"url":"$base/api/v1/config/$seq"}"""

  def kindOf(topic: String): String = topic.substring(topic.lastIndexOf('/') + 1)

  /** Sees the devices connect (their client ids, so that pushes can reach each device) and the
    * broker's own errors. Runs on the broker's interceptor thread.
    */
  private final class Watcher extends AbstractInterceptHandler:
    val clients: java.util.Set[String] = ConcurrentHashMap.newKeySet[String]()
    def getID: String = "fleetsim-controller"
    override def onConnect(message: InterceptConnectMessage): Unit = clients.add(message.getClientID)
    override def onSessionLoopError(error: Throwable): Unit = log.warn("MQTT broker: {}", error.toString)

  /** Counts each device's publish when the broker asks whether it may take it, and lets it: that is
    * on the connection's own thread, before the broker's PUBACK. An interceptor hears of a publish
    * later, on a thread of its own, so a device could count a publish acknowledged that the
    * controller had not counted yet (MqttEndToEndSpec saw 103 against 102). The controller's own
    * pushes (`internalPublish`) are not asked about, so they are not counted.
    */
  private final class Counter(registry: Registry) extends IAuthorizatorPolicy:
    def canWrite(topic: Topic, user: String, client: String): Boolean =
      registry.countReceived(kindOf(topic.toString))
      true
    def canRead(topic: Topic, user: String, client: String): Boolean = true

  /** Starts the broker on `host`:`port` (0: a free one), anonymous clients allowed, nothing persisted. */
  def start(host: String, port: Int, registry: Registry): MqttBroker =
    // Port 0: a free one chosen here. Moquette binds before startServer returns but writes the bound
    // port into a plain HashMap from its own thread, so reading it back races that thread.
    val chosen = if port != 0 then port else freePort(host)
    val properties = Properties()
    properties.setProperty("host", host)
    properties.setProperty("port", chosen.toString)
    properties.setProperty("websocket_port", "disabled")
    properties.setProperty("persistence_enabled", "false")
    properties.setProperty("allow_anonymous", "true")
    properties.setProperty("telemetry_enabled", "false") // it would call home: tests and benchmarks stay on loopback
    properties.setProperty("netty.native", "false")
    properties.setProperty("intercept.thread_pool.size", "1")
    // A CONNECT that finds its session loop's queue full gets no CONNACK, and a fleet stopping at once
    // queues about three commands a device (DISCONNECT, connection lost, flush): room for the largest
    // fleet the open-file budget lets share a process with the broker (9,900 devices), on one loop.
    properties.setProperty("session_queue_size", "65536")
    properties.setProperty("netty.mqtt.message_size", (1 << 20).toString)
    val server = Server()
    val watcher = Watcher()
    try server.startServer(MemoryConfig(properties), java.util.List.of(watcher), null, null, Counter(registry))
    catch case e: RuntimeException => throw fleetsim.CannotBind.of(host, port, "mqtt", e).getOrElse(e)
    new MqttBroker(server, host, chosen, watcher, retainedOf(server))

  /** The broker's store of retained messages, which Moquette 0.18.3 keeps to itself (its server's
    * post office holds it): [[publish]] retains before it routes.
    */
  private def retainedOf(server: Server): IRetainedRepository =
    def field(owner: Class[?], name: String, of: AnyRef): AnyRef =
      val f = owner.getDeclaredField(name)
      f.setAccessible(true)
      f.get(of)
    val postOffice = field(classOf[Server], "dispatcher", server)
    field(postOffice.getClass, "retainedRepository", postOffice).asInstanceOf[IRetainedRepository]

  private def freePort(host: String): Int =
    val socket = java.net.ServerSocket(0, 1, java.net.InetAddress.getByName(host))
    try socket.getLocalPort finally socket.close()
