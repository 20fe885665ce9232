package fleetsim.transport.mqtt

import com.hivemq.client.internal.mqtt.MqttClientConfig
import com.hivemq.client.mqtt.datatypes.MqttQos
import com.hivemq.client.mqtt.lifecycle.MqttClientDisconnectedContext
import com.hivemq.client.mqtt.mqtt3.Mqtt3AsyncClient
import com.hivemq.client.mqtt.mqtt3.exceptions.Mqtt3ConnAckException
import com.hivemq.client.mqtt.mqtt3.message.connect.connack.Mqtt3ConnAckReturnCode
import com.hivemq.client.mqtt.mqtt3.message.subscribe.{Mqtt3Subscribe, Mqtt3Subscription}
import com.hivemq.client.mqtt.mqtt5.Mqtt5AsyncClient
import com.hivemq.client.mqtt.mqtt5.message.subscribe.{Mqtt5Subscribe, Mqtt5Subscription}
import com.hivemq.client.mqtt.mqtt5.exceptions.{Mqtt5ConnAckException, Mqtt5PubAckException}
import com.hivemq.client.mqtt.mqtt5.message.connect.connack.Mqtt5ConnAckReasonCode
import com.hivemq.client.mqtt.{MqttClient, MqttClientExecutorConfig, MqttClientSslConfig, MqttGlobalPublishFilter}
import fleetsim.transport.*
import io.netty.channel.EventLoop
import io.netty.channel.nio.NioEventLoopGroup
import io.netty.util.ResourceLeakDetector
import io.netty.util.concurrent.{GenericFutureListener, Future as NettyFuture}
import io.reactivex.schedulers.Schedulers
import org.apache.pekko.Done

import java.net.InetSocketAddress
import java.util.concurrent.atomic.AtomicInteger
import java.util.concurrent.{CompletableFuture, CompletionException, ConcurrentHashMap, TimeUnit, TimeoutException}
import scala.concurrent.duration.FiniteDuration
import scala.concurrent.{ExecutionContext, Future, Promise}
import scala.jdk.FutureConverters.*
import scala.jdk.CollectionConverters.*

/** MQTT devices' connections: one HiveMQ client per device, on `loops` Netty event loops
  * ([[IoThreads.loopsFor]]). Device i's client is on loop `io.of(i)`, and so are its actor and its
  * wake-ups ([[IoThreads]]). A device's connection is its join (CONNECT,
  * CONNACK, SUBSCRIBE to its push topics) and its session: publishes travel through it, and pushes
  * come back on it. The client never reconnects by itself: a lost connection is the device's to
  * recover from, with its own backoff.
  *
  * @param tls per device: how its connection speaks TLS (mqtts://); None = plain
  * @param sources per device: the local address it connects from (--source-ips)
  * @param connectTimeout for the TCP (and TLS) connection
  * @param requestTimeout a CONNACK, or a QoS 1 publish's PUBACK, not come within it fails as timed out
  * @param loops event loops for these sessions' devices ([[IoThreads.loopsFor]])
  */
final class MqttSessions(host: String, port: Int, options: MqttOptions, tls: Option[Int => Future[MqttClientSslConfig]],
    sources: Option[SourceAddresses], connectTimeout: FiniteDuration, requestTimeout: FiniteDuration, loops: Int)(using ExecutionContext)
    extends Sessions:
  import MqttSessions.*

  // Netty records a stack trace for one buffer in 128 to find leaks, 1.5% of an MQTT fleet's event
  // loop (bench/history/2026-12-06-mqtt-publish-profile.md): a debugging aid, off unless asked for.
  // The process's: the embedded broker's buffers too.
  if Seq("io.netty.leakDetection.level", "io.netty.leakDetectionLevel", "io.netty.noResourceLeakDetection").forall(System.getProperty(_) == null) then
    ResourceLeakDetector.setLevel(ResourceLeakDetector.Level.DISABLED)

  /** Event loops of one thread each, so that device i's client is on loop `io.of(i)` ([[IoThreads]]). */
  private val groups =
    val threads = fleetsim.DaemonThreads("fleetsim-mqtt-io")
    IndexedSeq.fill(loops.max(1))(NioEventLoopGroup(1, threads))
  private val loop = groups.map(_.next())
  private val executors = groups.map { group =>
    MqttClientExecutorConfig.builder()
      .nettyExecutor(group)
      .nettyThreads(1)
      // Callbacks (PUBACKs, pushes, connects) run where the client completes them, on the event loop:
      // what they do never blocks, and a hand-over to a thread pool of its own woke a sleeping thread
      // for each publish (bench/history/2026-11-23-mqtt-cpu-thread-crossings.md).
      .applicationScheduler(Schedulers.from((task: Runnable) => task.run()))
      .build()
  }

  /** The event loops, for these sessions' devices to run on: a device's publish is then written, and
    * its PUBACK read, by the thread the device runs on.
    */
  val io: IoThreads = new IoThreads:
    def size: Int = loop.size
    def current: Int =
      var i = 0
      while i < size && !loop(i).inEventLoop do i += 1
      if i < size then i else -1
    def execute(thread: Int, task: Runnable): Unit = loop(thread).execute(task)
    def after(thread: Int, delay: FiniteDuration)(task: () => Unit): java.util.concurrent.Future[?] =
      loop(thread).schedule((() => task()): Runnable, delay.toNanos, TimeUnit.NANOSECONDS)

  /** Disconnects under way: the event loops stay up until they are done. */
  private val closing = ConcurrentHashMap.newKeySet[CompletableFuture[?]]()

  /** The device is who its number says in the profile's `mqtt` section: `login` and `offered` are not read. */
  def open(device: Int, login: String, offered: Option[SessionOffer], pushed: Push => Unit): Future[Either[SessionFailure, Session]] =
    val identity = options.identity(device)
    tls.fold(Future.successful(None))(_(device).map(Some(_))).flatMap(ssl => connect(device, identity, ssl, pushed)).recover {
      case e => Left(failure(e)) // a certificate that could not be issued or read
    }

  private def connect(device: Int, identity: MqttIdentity, ssl: Option[MqttClientSslConfig], pushed: Push => Unit): Future[Either[SessionFailure, Session]] =
    val lost = Promise[Done]()
    val connected = java.util.concurrent.atomic.AtomicBoolean(false)
    /** The CONNACK came: from then until the SUBACK, a closed connection fails the connect at once
      * ([[closedEarly]]). Before it, the connect's own future says so, once the client let go.
      */
    val connacked = java.util.concurrent.atomic.AtomicBoolean(false)
    /** The connection closed between the CONNACK and the SUBACK: the client's subscribe can wait out
      * its deadline for an answer that will not come, so the connect fails at once instead. Moquette
      * 0.18.3 (the reference controller's broker) does that on a busy machine: it marks a connection
      * connected in a listener it adds to the CONNACK's write only after starting the write, so the
      * device's SUBSCRIBE can be read before that listener runs, and it then drops the connection
      * ("SUBSCRIBE received on already closed connection", dozens of times in a test suite's run).
      */
    val closedEarly = Promise[Throwable]()
    val builder = MqttClient.builder()
      .identifier(identity.clientId)
      .serverHost(host)
      .serverPort(port)
      .executorConfig(executors(io.of(device)))
      .addDisconnectedListener((c: MqttClientDisconnectedContext) =>
        if connected.get then lost.trySuccess(Done) else if connacked.get then closedEarly.trySuccess(c.getCause))
    ssl.foreach(builder.sslConfig)
    // After host, port and TLS, which it copies (setting those later would reset it).
    val transport = builder.transportConfig()
      .socketConnectTimeout(connectTimeout.toMillis, TimeUnit.MILLISECONDS)
      .mqttConnectTimeout(requestTimeout.toMillis, TimeUnit.MILLISECONDS)
    sources.foreach(s => transport.localAddress(InetSocketAddress(s.of(device), 0)))
    transport.applyTransportConfig()
    val client: Client =
      if options.version == 5 then V5Client(builder.useMqttVersion5().buildAsync(), identity, pushed)
      else V3Client(builder.useMqttVersion3().buildAsync(), identity, pushed)
    // The connect and the subscribe each wait for the broker's answer: a SUBACK that never comes must not hold the device.
    val deadline = (connectTimeout + requestTimeout * 2).toMillis
    val attempt = client.connect(() => connacked.set(true)).orTimeout(deadline, TimeUnit.MILLISECONDS)
    closedEarly.future.foreach(attempt.completeExceptionally)(using ExecutionContext.parasitic)
    attempt.asScala.map { _ =>
      connected.set(true)
      Right(MqttSession(client, lost.future, loop(io.of(device)))): Either[SessionFailure, Session]
    }.recoverWith { case e =>
      // The failure is told once the connection is let go (a second at most): a gate of connects
      // then never has more open at once than its turns.
      disconnect(client).handle((_, _) => Left(failure(e))).completeOnTimeout(Left(failure(e)), 1, TimeUnit.SECONDS).asScala
    }

  private def disconnect(client: Client): CompletableFuture[?] =
    val done = client.disconnect()
    closing.add(done)
    done.whenComplete((_, _) => closing.remove(done))
    done

  /** After the devices have closed their sessions: waits (a few seconds at most) for their
    * DISCONNECTs to go out, then stops the event loops.
    */
  def close(): Future[Done] =
    val pending = closing.toArray(Array.empty[CompletableFuture[?]])
    CompletableFuture.allOf(pending*).completeOnTimeout(null, 5, TimeUnit.SECONDS).handle((_, _) => Done).asScala.flatMap { _ =>
      Future.traverse(groups) { group =>
        val stopped = Promise[Done]()
        val terminated = group.shutdownGracefully(0, 1, TimeUnit.SECONDS).asInstanceOf[NettyFuture[Any]]
        terminated.addListener(new GenericFutureListener[NettyFuture[Any]]: // typed: a lambda here links to Nothing and fails at run time
          def operationComplete(done: NettyFuture[Any]): Unit = stopped.success(Done))
        stopped.future
      }.map(_ => Done)
    }

  /** One device's session: its publishes, at most `maxInFlight` not yet acknowledged (QoS 1) or
    * written (QoS 0) — the client would queue the rest without bound.
    */
  private final class MqttSession(client: Client, val lost: Future[Done], eventLoop: EventLoop) extends Session:
    private val inFlight = AtomicInteger()

    def send(device: Int, request: Request): Future[Reply] =
      // Lost: the client, still settling its state, could hold the publish until the deadline.
      if lost.isCompleted then Future.successful(Broken)
      else if inFlight.incrementAndGet() > options.maxInFlight then
        inFlight.decrementAndGet()
        Future.successful(Overloaded)
      else
        val reply = Promise[Reply]()
        // On the device's event loop, where it sends and its PUBACK is read: setting and clearing the
        // deadline wakes no other thread (a CompletableFuture's timeout was its own thread's).
        val deadline = eventLoop.schedule((() => { reply.trySuccess(TimedOut); () }): Runnable, requestTimeout.toNanos, TimeUnit.NANOSECONDS)
        client.publish(request).whenComplete { (_, error) =>
          inFlight.decrementAndGet() // when the client is done with it, not at our deadline
          deadline.cancel(false)
          reply.trySuccess(if error == null then Delivered else Reply.Failed(reason(error)))
        }
        reply.future

    def close(): Future[Done] =
      disconnect(client)
      Future.successful(Done)

    override def cut(): Unit = client.drop()

  /** What the two protocol versions' clients have in common, as a session needs it. Their builders
    * share no types, so each version fills in the CONNECT and the SUBSCRIBE itself.
    */
  private sealed abstract class Client(identity: MqttIdentity):
    /** CONNECT, CONNACK (then `connacked`), then SUBSCRIBE to the device's push topics. */
    def connect(connacked: () => Unit): CompletableFuture[?] =
      connack().thenCompose[Any] { _ =>
        connacked()
        if identity.subscriptions.isEmpty then CompletableFuture.completedFuture(null) else subscribe().thenApply(a => a)
      }
    protected def connack(): CompletableFuture[?]
    protected def subscribe(): CompletableFuture[?]
    def publish(request: Request): CompletableFuture[?]
    def disconnect(): CompletableFuture[?]
    /** The connection's channel closed under the client, no DISCONNECT sent: the broker publishes the
      * device's will. The client's API has no such call; its connection's channel is in its internal
      * config (MQTT 3.1.1's behind a view): MosquittoSpec holds both to the client's version.
      */
    def drop(): Unit = Option(config.getRawConnectionConfig).foreach(_.getChannel.close())
    protected def config: MqttClientConfig

  private final class V5Client(client: Mqtt5AsyncClient, identity: MqttIdentity, pushed: Push => Unit) extends Client(identity):
    protected def connack(): CompletableFuture[?] =
      // Set before the CONNECT: a persistent session's queued pushes may come right after the CONNACK.
      client.publishes(MqttGlobalPublishFilter.SUBSCRIBED, p => pushed(Push(p.getTopic.toString, p.getPayloadAsBytes)))
      val connect = client.connectWith()
        .cleanStart(options.cleanStart)
        .keepAlive(options.keepAlive.toSeconds.toInt)
        .sessionExpiryInterval(options.sessionExpiry.toSeconds)
      identity.username.foreach { user =>
        val auth = connect.simpleAuth().username(user)
        identity.password.fold(auth)(auth.password).applySimpleAuth()
      }
      identity.will.foreach { (topic, payload) =>
        connect.willPublish().topic(topic).payload(payload).qos(qos(options.willQos)).retain(options.willRetain).applyWillPublish()
      }
      connect.send()

    protected def subscribe(): CompletableFuture[?] =
      val filters = identity.subscriptions.map(f => Mqtt5Subscription.builder().topicFilter(f).qos(qos(options.pushQos)).build())
      client.subscribe(Mqtt5Subscribe.builder().addSubscriptions(filters.asJava).build())

    def publish(request: Request): CompletableFuture[?] =
      client.publishWith().topic(request.path).payload(request.body).qos(qos(request.qos)).retain(request.retain).send()

    def disconnect(): CompletableFuture[?] = client.disconnect()
    protected def config: MqttClientConfig = client.getConfig.asInstanceOf[MqttClientConfig]

  private final class V3Client(client: Mqtt3AsyncClient, identity: MqttIdentity, pushed: Push => Unit) extends Client(identity):
    protected def connack(): CompletableFuture[?] =
      client.publishes(MqttGlobalPublishFilter.SUBSCRIBED, p => pushed(Push(p.getTopic.toString, p.getPayloadAsBytes)))
      val connect = client.connectWith()
        .cleanSession(options.cleanStart)
        .keepAlive(options.keepAlive.toSeconds.toInt)
      identity.username.foreach { user =>
        val auth = connect.simpleAuth().username(user)
        identity.password.fold(auth)(auth.password).applySimpleAuth()
      }
      identity.will.foreach { (topic, payload) =>
        connect.willPublish().topic(topic).payload(payload).qos(qos(options.willQos)).retain(options.willRetain).applyWillPublish()
      }
      connect.send()

    protected def subscribe(): CompletableFuture[?] =
      val filters = identity.subscriptions.map(f => Mqtt3Subscription.builder().topicFilter(f).qos(qos(options.pushQos)).build())
      client.subscribe(Mqtt3Subscribe.builder().addSubscriptions(filters.asJava).build())

    def publish(request: Request): CompletableFuture[?] =
      client.publishWith().topic(request.path).payload(request.body).qos(qos(request.qos)).retain(request.retain).send()

    def disconnect(): CompletableFuture[?] = client.disconnect()
    protected def config: MqttClientConfig = MqttSessions.v3Delegate.get(client.getConfig).asInstanceOf[MqttClientConfig]

object MqttSessions:
  /** Where an MQTT 3.1.1 client's view of its config keeps the config itself. */
  private lazy val v3Delegate: java.lang.reflect.Field =
    val field = classOf[com.hivemq.client.internal.mqtt.mqtt3.Mqtt3ClientConfigView].getDeclaredField("delegate")
    field.setAccessible(true)
    field
  /** A publish the broker took (QoS 1: PUBACK'd; QoS 0: written): one reply for all. */
  private val Delivered = Reply.Response(200, Array.emptyByteArray)
  private val Overloaded = Reply.Failed(FailureReason.Overloaded)
  private val TimedOut = Reply.Failed(FailureReason.TimedOut)
  private val Broken = Reply.Failed(FailureReason.ProtocolError)

  private def qos(level: Int): MqttQos = if level == 0 then MqttQos.AT_MOST_ONCE else MqttQos.AT_LEAST_ONCE

  /** Why a connect failed, as the device acts on it: credentials refused or not authorized, the
    * broker does not admit it; anything else, it tries again.
    */
  private def failure(e: Throwable): SessionFailure = reason(e) match
    case FailureReason.Unauthorized => SessionFailure.Refused(FailureReason.Unauthorized)
    case other => SessionFailure.Failed(other)

  /** Why a connect or a publish failed, in a device's terms. */
  def reason(e: Throwable): FailureReason =
    val cause = e match
      case c: CompletionException if c.getCause != null => c.getCause
      case other => other
    cause match
      case c: Mqtt5ConnAckException => refusal(c.getMqttMessage.getReasonCode)
      case c: Mqtt3ConnAckException =>
        c.getMqttMessage.getReturnCode match
          case Mqtt3ConnAckReturnCode.BAD_USER_NAME_OR_PASSWORD | Mqtt3ConnAckReturnCode.NOT_AUTHORIZED => FailureReason.Unauthorized
          case _ => FailureReason.Rejected
      case p: Mqtt5PubAckException =>
        if p.getMqttMessage.getReasonCode.isError then FailureReason.Rejected else FailureReason.ProtocolError
      case _: TimeoutException => FailureReason.TimedOut
      case d: Exception if Option(d.getMessage).exists(_.contains("Timeout while waiting for CONNACK")) => FailureReason.TimedOut
      case _: java.net.ConnectException => FailureReason.ConnectFailed
      case other => Replies.tlsReason(other).getOrElse(
        if Option(other.getCause).exists(_.isInstanceOf[java.net.ConnectException]) then FailureReason.ConnectFailed else FailureReason.ProtocolError)

  /** A CONNACK's refusal: credentials refused or not authorized mean what a 401 or 403 means. */
  private def refusal(code: Mqtt5ConnAckReasonCode): FailureReason = code match
    case Mqtt5ConnAckReasonCode.BAD_USER_NAME_OR_PASSWORD | Mqtt5ConnAckReasonCode.NOT_AUTHORIZED | Mqtt5ConnAckReasonCode.BANNED |
        Mqtt5ConnAckReasonCode.BAD_AUTHENTICATION_METHOD => FailureReason.Unauthorized
    case Mqtt5ConnAckReasonCode.SERVER_BUSY | Mqtt5ConnAckReasonCode.SERVER_UNAVAILABLE | Mqtt5ConnAckReasonCode.QUOTA_EXCEEDED |
        Mqtt5ConnAckReasonCode.CONNECTION_RATE_EXCEEDED => FailureReason.Throttled
    case _ => FailureReason.Rejected
