package fleetsim.transport

import org.apache.pekko.actor.typed.ActorSystem
import org.apache.pekko.stream.scaladsl.Flow

import java.net.{Inet4Address, InetAddress, InetSocketAddress}
import javax.net.ssl.SSLEngine
import scala.concurrent.{ExecutionContext, Future}
import scala.util.Success

/** How a fleet's calls share connections to the controller.
  *
  * @param key what a device profile's `connection` says
  */
enum ConnectionMode(val key: String):
  /** A few pipelined connections carry every device's calls: the cheapest, and today's default. */
  case Shared extends ConnectionMode("shared")
  /** Each device keeps one keep-alive connection of its own, as a real device does. */
  case PerDevice extends ConnectionMode("per-device")
  /** Each call opens a connection and closes it after the reply, as agents built on curl do. */
  case PerCall extends ConnectionMode("per-call")

/** TLS as the transport needs it: a client engine for each connection a device opens. */
trait TlsClient:
  /** A client-mode engine for a connection of `device`, once the device's certificate is ready (at
    * once when devices have none). */
  def engine(device: Int): Future[SSLEngine]
  /** Each device presents a certificate of its own, which lives in its connection: devices cannot share one. */
  def perDevice: Boolean

/** The local addresses devices call from, each device always from the same one: real controllers
  * key devices by address, and one address pair has room for only about 28,000 connections.
  */
sealed trait SourceAddresses:
  def size: Long
  /** Device `device`'s address. */
  def of(device: Int): InetAddress
  /** Addresses to try binding before any device starts: a block's ends, or every listed one. */
  def samples: Seq[InetAddress]

object SourceAddresses:
  private final case class Block(start: Long, count: Long) extends SourceAddresses:
    def size: Long = count
    def of(device: Int): InetAddress = ipv4(start + device % count)
    def samples: Seq[InetAddress] = Seq(ipv4(start), ipv4(start + count - 1)).distinct

  private final case class Listed(addresses: IndexedSeq[InetAddress]) extends SourceAddresses:
    def size: Long = addresses.size
    def of(device: Int): InetAddress = addresses(device % addresses.size)
    def samples: Seq[InetAddress] = addresses

  /** From `127.0.1.0/24` (every address of the block) or `127.0.0.2,127.0.0.3`; Left says what is wrong. */
  def parse(text: String): Either[String, SourceAddresses] =
    val spec = text.trim
    spec.split('/') match
      case Array(base, bits) =>
        for
          network <- address(base).flatMap {
            case v4: Inet4Address => Right(v4)
            case _ => Left(s"'$spec': only IPv4 blocks are supported; list IPv6 addresses with commas")
          }
          prefix <- bits.toIntOption.filter(b => b >= 8 && b <= 32).toRight(s"'$spec': the prefix length must be a number from 8 to 32")
        yield
          val free = 32 - prefix
          Block((toLong(network) >> free) << free, 1L << free)
      case Array(_) =>
        spec.split(",", -1).map(_.trim).toVector
          .foldLeft[Either[String, Vector[InetAddress]]](Right(Vector.empty))((list, part) => list.flatMap(l => address(part).map(l :+ _)))
          .map(Listed(_))
      case _ => Left(s"'$spec' is neither a block (127.0.1.0/24) nor a list (127.0.0.2,127.0.0.3)")

  /** A literal address; never a name to look up. */
  private def address(text: String): Either[String, InetAddress] =
    val literal = text.nonEmpty && text.forall(c => c.isDigit || c == '.' || c == ':' || "abcdefABCDEF".contains(c))
    val parsed = if literal then scala.util.Try(InetAddress.getByName(text)).toOption else None
    parsed.toRight(s"'$text' is not an IP address")

  private def toLong(address: Inet4Address): Long = address.getAddress.foldLeft(0L)((v, b) => (v << 8) | (b & 0xff))

  private def ipv4(value: Long): InetAddress =
    InetAddress.getByAddress(Array((value >> 24).toByte, (value >> 16).toByte, (value >> 8).toByte, value.toByte))

/** Opens byte streams to the controller for a device: plain TCP or TLS, from the device's own
  * source address when the fleet has several.
  */
final class Dialer(host: String, port: Int, settings: HttpSettings, val tls: Option[TlsClient], val sources: Option[SourceAddresses])(
    using system: ActorSystem[?]):
  private val address = InetSocketAddress(host, port)
  private val sockets = Sockets(system)

  /** Devices carry an identity in their connection (an address or a certificate), so none may share one. */
  def identifiesDevices: Boolean = sources.isDefined || tls.exists(_.perDevice)

  /** The `loops` loops the devices may run on: a plain connection's receiver runs on its loop. None
    * under TLS, whose replies reach their receiver through a stream on the pool.
    */
  def io(loops: Int): Option[IoThreads] = Option.when(tls.isEmpty)(sockets.io(loops))

  /** A new connection for `device`, on loop `loop`, read by `receiver`, with up to `depth` calls
    * pipelined on it: plain, a socket that is its own wire, its reads parsed and answered on its
    * loop; under TLS, a stream over the socket's stage. Its connection closes it when idle
    * ([[Deadlines]]): a timeout on the socket would count a call waiting for its reply as idle.
    */
  def open(device: Int, loop: Int, depth: Int, receiver: Wire.Receiver): Wire =
    val local = sources.map(s => InetSocketAddress(s.of(device), 0))
    tls match
      case None => sockets.open(address, local, settings.connectTimeout, receiver, loop)
      case Some(client) =>
        val socket = sockets.connect(address, local, settings.connectTimeout, loop)
        val engine = client.engine(device)
        def over(e: SSLEngine) = TlsClientStage(e).join(socket)
        val bytes = engine.value match
          case Some(Success(ready)) => over(ready)
          case _ => Flow.futureFlow(engine.map(over)(using ExecutionContext.parasitic))
        Wire.over(bytes, depth, receiver)
