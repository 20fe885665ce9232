package fleetsim

import org.apache.pekko.http.scaladsl.model.{AttributeKeys, HttpRequest, Uri}
import org.apache.pekko.http.scaladsl.model.headers.{Host, Origin}

import java.net.InetAddress
import java.util.Locale

/** Who called one of fleetsim's servers, read from the request alone (so it is tested without a
  * socket), and whom an API that changes state answers: the controller's admin API, the dashboard's
  * restart.
  *
  * Only the socket says where a call came from: `X-Forwarded-For`, `X-Real-Ip` and `Forwarded` are
  * whatever the caller wrote, and no proxy stands in front of these servers whose word they would be.
  */
private[fleetsim] object Caller:
  /** The address of the socket's far end (Pekko's `remote-address-attribute`, on in reference.conf);
    * None for a call with no socket of its own: one carried in process through an SSH tunnel.
    */
  def address(request: HttpRequest): Option[InetAddress] =
    request.attribute(AttributeKeys.remoteAddress).flatMap(_.toOption)

  /** Why `api` (as a refusal names it: "the admin API") refuses this call, in one line; None when it answers it.
    *
    * A browser on this machine reaches loopback too, so a page of any site could post to the API (a
    * form, a `no-cors` fetch) or, rebinding its own name to 127.0.0.1, call it as its own origin.
    * Browsers mark such calls with `Origin` and `Sec-Fetch-Site`; curl, scripts and the SSH gateways'
    * `POST /admin/ssh/admits` send neither. Reads (GET and the other safe methods) are answered as before.
    *
    * @param anyHost callers on other hosts are the API's users too: the user bound its server to an
    *   address they reach (`--dashboard-host 0.0.0.0`)
    * @param tunnelled the call came through an SSH tunnel: a device's, even when the gateway that
    *   carried it sits on loopback
    */
  def refusal(request: HttpRequest, api: String, anyHost: Boolean, tunnelled: Boolean): Option[String] =
    if !anyHost && !address(request).exists(_.isLoopbackAddress) then Some(s"$api answers only callers on loopback")
    else if tunnelled then Some(s"$api answers no call that came through an SSH tunnel")
    else if request.method.isSafe then None // GET, HEAD, OPTIONS, TRACE change nothing
    else if fetchedFromAnotherSite(request) then Some(s"$api takes no ${request.method.value} from a page of another site")
    else if foreignOrigin(request) then
      Some(s"$api takes no ${request.method.value} from a page of another origin: Origin must be its own loopback address, as called")
    else None

  /** `Sec-Fetch-Site: cross-site` or `same-site` (another port of localhost is the same site). */
  private def fetchedFromAnotherSite(request: HttpRequest): Boolean =
    request.headers.exists(h => h.is("sec-fetch-site") && Set("cross-site", "same-site")(h.value.trim.toLowerCase(Locale.ROOT)))

  /** An `Origin` other than the server's own loopback origin: scheme, host and port as the call's
    * `Host` names them. `Origin: null` (a sandboxed frame, a file, a redirect), more than one Origin
    * and one that does not parse are foreign. (Not echoed in the reply: it is the caller's text.)
    */
  private def foreignOrigin(request: HttpRequest): Boolean =
    request.headers.filter(_.is("origin")) match
      case Seq() => false
      case Seq(Origin(Seq(origin))) =>
        !request.header[Host].exists(host =>
          origin.scheme == request.uri.scheme && isLoopback(origin.host.host) && canonical(origin.host.host) == canonical(host.host) &&
            port(origin.scheme, origin.host.port) == port(request.uri.scheme, host.port))
      case _ => true

  /** A loopback address, or `localhost` by name: never resolved, since resolving a name is what rebinding abuses. */
  private def isLoopback(host: Uri.Host): Boolean =
    ipAddress(host).fold(host.address.equalsIgnoreCase("localhost"))(_.isLoopbackAddress)

  /** An address in one spelling (`[::1]` and `[0:0::1]` are one host), a name in lower case. */
  private def canonical(host: Uri.Host): String =
    ipAddress(host).fold(host.address.toLowerCase(Locale.ROOT))(_.getHostAddress)

  private def ipAddress(host: Uri.Host): Option[InetAddress] = host match
    case ip: Uri.IPv4Host => Some(InetAddress.getByAddress(ip.bytes.toArray))
    case ip: Uri.IPv6Host => Some(InetAddress.getByAddress(ip.bytes.toArray))
    case _: Uri.NamedHost => None
    case Uri.Host.Empty => None

  private def port(scheme: String, stated: Int): Int =
    if stated != 0 then stated else if scheme == "https" then 443 else 80
