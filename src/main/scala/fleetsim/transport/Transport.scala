package fleetsim.transport

import fleetsim.protocol.Identity
import fleetsim.protocol.{MessageKind, SshEndpoint}
import org.apache.pekko.Done

import scala.concurrent.Future

/** One call a device makes: GET when there is no body, POST with a JSON body otherwise. */
final case class Request(kind: MessageKind, path: String, body: Option[Array[Byte]])

/** The outcome of a call, as data: a transport's future never fails. */
sealed trait Reply
object Reply:
  final case class Ok(body: Array[Byte]) extends Reply
  case object Forbidden extends Reply
  final case class Failed(reason: FailureReason) extends Reply

/** Why a call failed, in terms a device and a reader of the summary can act on. */
enum FailureReason(val key: String):
  /** No connection could be made: the controller is down or unreachable. */
  case ConnectFailed extends FailureReason("connectFailed")
  /** No complete reply within the request timeout. */
  case TimedOut extends FailureReason("timedOut")
  /** The controller answered with a status other than 200 or 403. */
  case Rejected extends FailureReason("rejected")
  /** Every connection already had its fill of calls in flight (http.max-connections x
    * http.pipelining): the controller answers more slowly than the fleet calls. */
  case Overloaded extends FailureReason("overloaded")
  /** Anything else: a broken connection, a reply that is not protocol v1. */
  case ProtocolError extends FailureReason("protocolError")
  /** The SSH server refused the device's credentials: like a 403, the device must join again. */
  case AuthRejected extends FailureReason("authRejected")
  /** The SSH server's host key is not the one known for it (host-key mode strict or accept-new). */
  case HostKeyRejected extends FailureReason("hostKeyRejected")

/** How devices reach a controller. Implementations are shared and asynchronous; devices never see
  * a library exception, only a [[Reply]].
  */
trait Transport:
  def send(request: Request): Future[Reply]
  def close(): Future[Done]

/** A device's own tunnel to the controller: calls travel through it, and [[lost]] completes when
  * it goes down for any reason (closed by either side, keepalive unanswered, idle timeout).
  */
trait Tunnel extends Transport:
  def lost: Future[Done]

/** Opens tunnels, one per device, on resources shared by the whole fleet. */
trait Tunnels:
  /** @param offered the SSH endpoint the controller named at join, if any */
  def open(identity: Identity, offered: Option[SshEndpoint]): Future[Either[FailureReason, Tunnel]]
  /** The device's public key in OpenSSH format, sent at join so the controller can admit it. */
  def publicKey: Option[String]
  def close(): Future[Done]
