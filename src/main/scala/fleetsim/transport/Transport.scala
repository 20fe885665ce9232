package fleetsim.transport

import org.apache.pekko.Done
import org.apache.pekko.util.ByteString

import java.nio.charset.StandardCharsets.US_ASCII
import scala.concurrent.Future

/** What a call is for, as the device profile names it: the unit every count, latency and lateness
  * is kept by. A profile declares its kinds once, numbered from 0, so figures stay arrays.
  *
  * @param periodic sent on a schedule, so its lateness is measured
  */
final case class MessageKind(key: String, index: Int, periodic: Boolean)

/** One call a device makes, as its profile rendered it: an HTTP request, or an MQTT publish
  * (method PUBLISH, path its topic, no headers).
  *
  * @param headers header lines, each ending in CRLF (`Content-Type: ...\r\n`), or empty
  * @param body empty for none; a POST or PUT always says its Content-Length
  * @param qos an MQTT publish's QoS, 0 or 1; and whether the broker retains it
  * @param unsafe why the call cannot be sent as rendered (a header value holding CR, LF or NUL, which
  *               would end the header or start a second request), or null: it can
  * @param timeout how long the call may wait for its reply, in nanoseconds; 0: the transport's own timeout
  */
final case class Request(kind: MessageKind, method: String, path: String, headers: Array[Byte], body: Array[Byte], qos: Int = 0,
    retain: Boolean = false, unsafe: String = null, timeout: Long = 0):
  /** RFC 9110 §9.2.2: sent twice, it does what it does once, so a call lost to a closing connection may be sent again. */
  def idempotent: Boolean = method match
    case "GET" | "HEAD" | "PUT" | "DELETE" | "OPTIONS" | "TRACE" => true
    case _ => false

/** The outcome of a call, as data: a transport's future never fails. */
sealed trait Reply
object Reply:
  /** The controller answered, with any status. `head` is the status line and header lines. */
  final case class Response(status: Int, body: Array[Byte], head: ByteString = ByteString.empty) extends Reply:
    def ok: Boolean = status / 100 == 2

    /** The value of header `name` (any case), or null. */
    def header(name: String): String =
      val lines = head.decodeString(US_ASCII).split("\r\n")
      lines.iterator.drop(1).map(_.split(":", 2)).collectFirst {
        case Array(n, value) if n.trim.equalsIgnoreCase(name) => value.trim
      }.orNull

  final case class Failed(reason: FailureReason) extends Reply

/** Why a call failed, in terms a device and a reader of the summary can act on. */
enum FailureReason(val key: String):
  /** No connection could be made: the controller is down or unreachable. */
  case ConnectFailed extends FailureReason("connectFailed")
  /** No complete reply within the request timeout. */
  case TimedOut extends FailureReason("timedOut")
  /** The controller answered with a status the profile does not count as success, other than the ones below. */
  case Rejected extends FailureReason("rejected")
  /** 401: the device's credentials were not accepted; it authenticates again. */
  case Unauthorized extends FailureReason("unauthorized")
  /** 429 or 503: the controller asked the device to come back later (Retry-After). */
  case Throttled extends FailureReason("throttled")
  /** Every connection already had its fill of calls in flight (http.max-connections x
    * http.pipelining): the controller answers more slowly than the fleet calls. */
  case Overloaded extends FailureReason("overloaded")
  /** The TLS handshake failed for a reason none of the three below names (no common protocol or cipher, say). */
  case TlsHandshakeFailed extends FailureReason("tlsHandshakeFailed")
  /** The server refused the device's client certificate, or asked for one the device did not have. */
  case CertificateRejected extends FailureReason("certificateRejected")
  /** Not sent: the device's own certificate could not be had — its files in --client-certs missing,
    * unreadable, corrupt, not of one pair or out of date, or not issued — so it opened no connection.
    * Its next connection tries again. */
  case CertificateUnusable extends FailureReason("certificateUnusable")
  /** The server's certificate does not chain to a trusted CA (the system's, or --ca-file's). */
  case ServerUntrusted extends FailureReason("serverUntrusted")
  /** The server's certificate is trusted but names neither the host nor the IP address the device called. */
  case HostnameMismatch extends FailureReason("hostnameMismatch")
  /** Anything else: a broken connection, a reply that is not HTTP (a lying Content-Length, a status of 999). */
  case ProtocolError extends FailureReason("protocolError")
  /** The reply passed one of the profile's limits (status line, headers, body): the connection is closed. */
  case TooLarge extends FailureReason("tooLarge")
  /** A 2xx reply that lacks a value the profile keeps without a default, or holds one of the wrong type. */
  case Unreadable extends FailureReason("unreadable")
  /** A 2xx the call does not expect (its `expect` names the statuses that are success, like [201]). */
  case UnexpectedStatus extends FailureReason("unexpectedStatus")
  /** The reply failed one of the call's `check`s (a digest that does not match the one announced, say). */
  case CheckFailed extends FailureReason("checkFailed")
  /** Not sent: a value rendered into a header holds CR, LF or NUL, which would change the request's framing. */
  case UnsafeValue extends FailureReason("unsafeValue")
  /** The SSH server refused the device's credentials: like a 403, the device must join again. */
  case AuthRejected extends FailureReason("authRejected")
  /** The SSH server's host key is not the one known for it (host-key mode strict or accept-new). */
  case HostKeyRejected extends FailureReason("hostKeyRejected")
  /** Not sent: this cluster node's process had stopped for a while, and its devices wait until it
    * knows it is still a member ([[HeldBack]]). */
  case HeldBack extends FailureReason("heldBack")

/** A failure whose reason is known where it happens (a device's certificate that cannot be read,
  * say), for a transport to count as `reason`: a user's file, not a bug, so it has no stack trace.
  */
final class KnownFailure(val reason: FailureReason, message: String) extends RuntimeException(message, null, false, false)

/** How devices reach a controller. Implementations are shared and asynchronous; devices never see
  * a library exception, only a [[Reply]].
  */
trait Transport:
  /** @param device the sender's number in the fleet: a transport that gives devices their own
    *               connection, address or certificate finds them by it; a shared one ignores it
    */
  def send(device: Int, request: Request): Future[Reply]
  def close(): Future[Done]

/** A message a device's session brought it unasked: a config push on one of its MQTT subscriptions. */
final case class Push(topic: String, payload: Array[Byte])

/** A device's own session with the controller — an SSH tunnel, an MQTT connection: calls travel
  * through it, and [[lost]] completes when it goes down for any reason (closed by either side,
  * keepalive unanswered, idle timeout).
  */
trait Session extends Transport:
  def lost: Future[Done]
  /** Ends the session without a word, as a device that loses its power does: the connection goes,
    * no goodbye is sent (an MQTT broker then publishes the device's will). [[close]] says goodbye.
    */
  def cut(): Unit = close()

/** What a device's join said of its session, as its profile read it (where its SSH tunnel goes,
  * [[ssh.SshEndpoint]]): each kind's sessions read the offer they know and pass over any other.
  */
trait SessionOffer

/** Why a session did not open, as the device acts on it; `reason` is what the figures count it as. */
sealed trait SessionFailure:
  def reason: FailureReason

object SessionFailure:
  /** The server does not admit this device (SSH credentials refused, MQTT's CONNACK: bad credentials or
    * not authorized): as after a 403, the device forgets its session and joins again, later.
    */
  final case class Refused(reason: FailureReason) extends SessionFailure
  /** Not opened for any other reason (unreachable, timed out, a host key refused, too many waiting,
    * held back): the device tries again after a backoff.
    */
  final case class Failed(reason: FailureReason) extends SessionFailure

/** Opens sessions, one per device, on resources shared by the whole fleet: SSH tunnels after an
  * HTTP join, or MQTT connections, which are the join themselves. A transport kind makes them
  * (fleetsim.run.TransportKind); wrappers meter, gate and hold them back.
  */
trait Sessions:
  /** @param device the device's number in the fleet
    * @param login the name the device's session logs in with, as its profile renders it (its MAC, for protocol v1)
    * @param offered what the device's join said of its session, if anything
    * @param pushed called with each message the session brings unasked, from the transport's thread
    */
  def open(device: Int, login: String, offered: Option[SessionOffer], pushed: Push => Unit): Future[Either[SessionFailure, Session]]
  def close(): Future[Done]
