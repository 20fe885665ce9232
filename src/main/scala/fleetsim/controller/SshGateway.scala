package fleetsim.controller

import com.github.plokhotnyuk.jsoniter_scala.core.{JsonValueCodec, writeToArray}
import com.github.plokhotnyuk.jsoniter_scala.macros.JsonCodecMaker
import fleetsim.CannotBind
import fleetsim.transport.ssh.SshStreams
import org.apache.pekko.{Done, NotUsed}
import org.apache.pekko.actor.typed.{ActorSystem, DispatcherSelector}
import org.apache.pekko.http.scaladsl.Http
import org.apache.pekko.http.scaladsl.model.headers.RawHeader
import org.apache.pekko.http.scaladsl.model.{AttributeKey, ContentTypes, HttpEntity, HttpMethods, HttpRequest, HttpResponse, StatusCodes, Uri}
import org.apache.pekko.http.scaladsl.settings.ConnectionPoolSettings
import org.apache.pekko.stream.scaladsl.{BidiFlow, Flow, TLSPlacebo}
import org.apache.pekko.util.ByteString
import org.apache.sshd.client.future.DefaultOpenFuture
import org.apache.sshd.client.future.OpenFuture
import org.apache.sshd.common.SshConstants
import org.apache.sshd.common.channel.exception.SshChannelOpenException
import org.apache.sshd.common.channel.{Channel, ChannelAsyncInputStream, ChannelAsyncOutputStream, ChannelFactory}
import org.apache.sshd.common.config.keys.{PublicKeyEntry, PublicKeyEntryResolver}
import org.apache.sshd.common.session.Session
import org.apache.sshd.common.util.buffer.{Buffer, ByteArrayBuffer}
import org.apache.sshd.common.util.security.SecurityUtils
import org.apache.sshd.core.CoreModuleProperties
import org.apache.sshd.server.SshServer
import org.apache.sshd.server.auth.AsyncAuthException
import org.apache.sshd.server.channel.AbstractServerChannel
import org.apache.sshd.server.forward.RejectAllForwardingFilter
import org.apache.sshd.server.keyprovider.SimpleGeneratorHostKeyProvider

import java.net.{BindException, InetSocketAddress}
import java.nio.file.Files
import java.time.Duration as JDuration
import java.util.concurrent.ThreadLocalRandom
import scala.concurrent.{ExecutionContext, Future}
import scala.jdk.CollectionConverters.*
import scala.util.{Success, Try}

/** The reference controller's SSH server, in its process or (`fleetsim ssh-gateway`) in one of its
  * own. Devices that joined log in with their MAC and the key they presented at join; their
  * direct-tcpip channels carry HTTP straight into the controller's routes, in process, so a tunnel
  * costs the controller one socket, not three; a gateway's carry it over a few pooled connections.
  * Forwarding anywhere but the controller's own HTTP address is refused.
  */
final class SshGateway private (server: SshServer):
  def address: InetSocketAddress = server.getBoundAddresses.asScala.head.asInstanceOf[InetSocketAddress]
  def sessions: Int = server.getActiveSessions.size

  /** Closes that fraction of the open sessions at once, picked at random: a herd to recover from. */
  def drop(fraction: Double): Int =
    val victims = server.getActiveSessions.asScala.filter(_ => ThreadLocalRandom.current().nextDouble() < fraction)
    victims.foreach(_.close(true))
    victims.size

  def stop(): Future[Done] = SshStreams.completion(server.close(false))(_ => Success(Done))

object SshGateway:
  /** Set on requests that arrived through a tunnel: the name the device logged in with. */
  val Tunnelled: AttributeKey[String] = AttributeKey[String]("fleetsim-tunnelled")
  /** What a gateway in a process of its own marks the calls it forwards with: the device's login. */
  val TunnelledHeader = "Fleetsim-Tunnelled"
  private val tunnelledHeader = TunnelledHeader.toLowerCase

  /** The call came through a tunnel: of this controller's SSH server, or of a gateway in a process of its own. */
  def tunnelled(request: HttpRequest): Boolean =
    request.attribute(Tunnelled).isDefined || request.headers.exists(_.is(tunnelledHeader))

  /** An OpenSSH public key line (`ssh-ed25519 AAAA...`), as a device presents it at join and a gateway in its [[KeyCheck]]. */
  def publicKey(text: String): Try[java.security.PublicKey] =
    Try(PublicKeyEntry.parsePublicKeyEntry(text).resolvePublicKey(null, null, PublicKeyEntryResolver.FAILING))

  /** The controller's own SSH server.
    *
    * @param handler the controller's routes as a flow, run once per tunnel channel
    * @param http the controller's HTTP address, the one place tunnels may lead
    */
  def start(settings: ControllerSettings, http: InetSocketAddress, registry: Registry, handler: Flow[HttpRequest, HttpResponse, ?])(using
      system: ActorSystem[?]): Future[SshGateway] =
    serve(settings, http, () => registry.countForwardRefused(), handler) { server =>
      server.setPublickeyAuthenticator((user, key, _) => registry.admits(user, key))
      settings.sshPassword.foreach { password =>
        server.setPasswordAuthenticator((user, offered, _) => offered == password && registry.find(user).isDefined)
      }
    }

  /** An SSH server in a process of its own (`fleetsim ssh-gateway`), for fleets with more tunnels
    * than one process can hold: it asks the controller at `controller` whether a device's key is
    * the one it joined with, and carries its tunnels' calls to the controller over a few pooled
    * connections, marked with [[TunnelledHeader]].
    */
  def forwarding(settings: ControllerSettings, controller: Uri)(using system: ActorSystem[?]): Future[SshGateway] =
    given ExecutionContext = system.executionContext
    val http = Http(system.classicSystem)
    val defaults = ConnectionPoolSettings(system.classicSystem)
    val pool = defaults.withMaxConnections(32).withMaxOpenRequests(1 << 14)
    val admits = controller.withPath(Uri.Path("/admin/ssh/admits"))
    def admitted(user: String, key: java.security.PublicKey): Future[Boolean] =
      val asked = HttpEntity(ContentTypes.`application/json`, writeToArray(KeyCheck(user, PublicKeyEntry.toString(key))))
      http.singleRequest(HttpRequest(HttpMethods.POST, admits, entity = asked), settings = pool)
        .map { reply => reply.discardEntityBytes(); reply.status == StatusCodes.NoContent }
        .recover { case _ => false }
    val proxy = Flow[HttpRequest].mapAsync(1) { request =>
      val forwarded = request
        .withUri(request.uri.withScheme(controller.scheme).withAuthority(controller.authority))
        .withHeaders(request.headers.filterNot(_.is("timeout-access")) :+ RawHeader(TunnelledHeader, request.attribute(Tunnelled).getOrElse("")))
      // The controller unreachable: the call fails, the tunnel stays, as a real gateway would answer.
      http.singleRequest(forwarded, settings = pool).recover { case _ => HttpResponse(StatusCodes.BadGateway) }
    }
    val target = Future(InetSocketAddress(controller.authority.host.address, controller.effectivePort))(using
      system.dispatchers.lookup(DispatcherSelector.blocking()))
    target.flatMap { address =>
      serve(settings, address, () => (), proxy) { server =>
        server.setPublickeyAuthenticator { (user, key, _) =>
          val pending = AsyncAuthException() // answered when the controller has
          admitted(user, key).foreach(pending.setAuthed)
          throw pending
        }
      }
    }

  /** The key a device logged in with, for the controller to compare with the one it joined with. */
  final case class KeyCheck(user: String, key: String)
  given JsonValueCodec[KeyCheck] = JsonCodecMaker.make

  private def serve(settings: ControllerSettings, http: InetSocketAddress, refused: () => Unit, handler: Flow[HttpRequest, HttpResponse, ?])(
      authentication: SshServer => Unit)(using system: ActorSystem[?]): Future[SshGateway] =
    // Binding and generating the host key block: done off the actors' threads.
    Future {
      Files.createDirectories(settings.stateDir)
      // Ed25519: of the host-key types, the cheapest for a fleet to verify thousands of times.
      val hostKeys = SimpleGeneratorHostKeyProvider(settings.stateDir.resolve("ssh_host_ed25519_key"))
      hostKeys.setAlgorithm(SecurityUtils.EDDSA)
      hostKeys.setKeySize(256) // Bouncy Castle's generator makes no key until told the curve
      val server = SshServer.setUpDefaultServer()
      server.setHost(settings.host)
      server.setPort(settings.sshPort)
      server.setKeyPairProvider(hostKeys)
      authentication(server)
      server.setForwardingFilter(RejectAllForwardingFilter.INSTANCE) // no port forwarding of the usual kind
      server.setChannelFactories(List[ChannelFactory](TunnelChannel.factory(http, refused, handler)).asJava)
      CoreModuleProperties.IDLE_TIMEOUT.set(server, JDuration.ofMillis(settings.sshIdleTimeout.toMillis))
      SshStreams.smallBuffers(server) // thousands of sessions, each held open
      SshStreams.fewIoThreads(server)
      try server.start()
      catch case e: BindException => throw CannotBind.of(settings.host, settings.sshPort, "ssh", e).get
      SshGateway(server)
    }(using system.dispatchers.lookup(DispatcherSelector.blocking()))

/** A direct-tcpip channel whose far end is the controller's own HTTP server, in process. */
private final class TunnelChannel(http: InetSocketAddress, refused: () => Unit, handler: Flow[HttpRequest, HttpResponse, ?],
    server: BidiFlow[HttpResponse, ByteString, ByteString, HttpRequest, NotUsed])(using system: ActorSystem[?])
    extends AbstractServerChannel(null):
  private var in: ChannelAsyncInputStream = null
  private var out: ChannelAsyncOutputStream = null

  override protected def doInit(buffer: Buffer): OpenFuture =
    val host = buffer.getString
    val port = buffer.getInt
    val opened = DefaultOpenFuture(this, this)
    if !leadsTo(host, port) then
      refused()
      try opened.setException(SshChannelOpenException(getChannelId, SshConstants.SSH_OPEN_ADMINISTRATIVELY_PROHIBITED,
          s"this controller forwards only to its HTTP address ${http.getHostString}:${http.getPort}"))
      finally close(true)
    else
      in = ChannelAsyncInputStream(this)
      out = ChannelAsyncOutputStream(this, SshConstants.SSH_MSG_CHANNEL_DATA)
      val user = getSession.getUsername
      Flow[HttpRequest]
        .map(_.addAttribute(SshGateway.Tunnelled, user))
        .via(handler)
        .join(server)
        .join(SshStreams.flow(in, out, () => close(false)))
        .run()
      signalChannelOpenSuccess() // sends the open confirmation
      opened.setOpened()
    opened

  private def leadsTo(host: String, port: Int): Boolean =
    port == http.getPort && (host == http.getHostString || host == http.getAddress.getHostAddress ||
      (host == "localhost" && http.getAddress.isLoopbackAddress))

  override protected def doWriteData(data: Array[Byte], off: Int, len: Long): Unit =
    in.write(ByteArrayBuffer(data, off, len.toInt))

  override protected def doWriteExtendedData(data: Array[Byte], off: Int, len: Long): Unit =
    throw UnsupportedOperationException("a tunnel carries no extended data")

  override def handleEof(): Unit =
    super.handleEof()
    if in != null then in.close(false) // the reader sees what is buffered, then end of stream

  override def handleWindowAdjust(buffer: Buffer): Unit =
    super.handleWindowAdjust(buffer)
    if out != null then out.onWindowExpanded()

  override protected def getInnerCloseable = builder().close(out).close(in).close(super.getInnerCloseable).build()

private object TunnelChannel:
  def factory(http: InetSocketAddress, refused: () => Unit, handler: Flow[HttpRequest, HttpResponse, ?])(using
      system: ActorSystem[?]): ChannelFactory =
    // One blueprint for every tunnel, as Pekko HTTP's own binding has: building it reads the server's
    // settings from the configuration (exceptions and all), about two thirds of what opening a tunnel cost.
    val server = Http(system.classicSystem).serverLayer().atop(TLSPlacebo())
    new ChannelFactory:
      def getName: String = "direct-tcpip"
      def createChannel(session: Session): Channel = TunnelChannel(http, refused, handler, server)
