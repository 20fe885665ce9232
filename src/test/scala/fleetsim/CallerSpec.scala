package fleetsim

import com.typesafe.config.ConfigFactory
import fleetsim.controller.{ControllerRoutes, ControllerSettings, Registry}
import fleetsim.e2e.withSystem
import org.apache.pekko.actor.typed.ActorSystem
import org.apache.pekko.http.scaladsl.model.*
import org.apache.pekko.http.scaladsl.server.Route
import org.scalatest.wordspec.AnyWordSpec

import java.net.{InetAddress, InetSocketAddress}
import scala.concurrent.Await
import scala.concurrent.duration.*

/** Who a server takes a call to come from, and whom an API that changes state answers. Tests can
  * bind only 127.0.0.0/8, so a caller on another host is a request built with the remote address
  * Pekko's server would have set on it; ControllerSpec and DashboardSpec have the same checks over
  * real sockets on loopback.
  */
class CallerSpec extends AnyWordSpec:
  private val loopback = InetSocketAddress(InetAddress.getByName("127.0.0.1"), 40000)
  private val remote = InetSocketAddress(InetAddress.getByName("203.0.113.7"), 40000)

  /** A header as Pekko's server hands it on: modelled when it parses, raw when it does not. */
  private def header(name: String, value: String): HttpHeader =
    HttpHeader.parse(name, value) match
      case HttpHeader.ParsingResult.Ok(parsed, _) => parsed
      case HttpHeader.ParsingResult.Error(_) => headers.RawHeader(name, value)

  private def request(method: HttpMethod = HttpMethods.POST, from: Option[InetSocketAddress] = Some(loopback), host: String = "127.0.0.1:8080",
      scheme: String = "http", path: String = "/admin/config/bump", sent: Seq[(String, String)] = Nil): HttpRequest =
    val plain = HttpRequest(method, Uri(s"$scheme://$host$path"), header("Host", host) +: sent.map(header))
    from.fold(plain)(address => plain.addAttribute(AttributeKeys.remoteAddress, RemoteAddress(address)))

  private def refusal(r: HttpRequest, tunnelled: Boolean = false, anyHost: Boolean = false) =
    Caller.refusal(r, "the admin API", anyHost, tunnelled)

  "A caller's address" should {
    "be the socket's, whatever X-Forwarded-For, X-Real-Ip or Forwarded claim" in {
      val claims = Seq("X-Forwarded-For" -> "127.0.0.1", "X-Real-Ip" -> "127.0.0.1", "Forwarded" -> "for=127.0.0.1")
      assert(Caller.address(request(from = Some(remote), sent = claims)).contains(remote.getAddress))
      assert(Caller.address(request(from = None, sent = claims)).isEmpty) // in process through a tunnel: no socket
    }
  }

  "The admin API" should {
    "refuse a caller on another host that claims loopback in X-Forwarded-For or X-Real-Ip" in {
      for claim <- Seq("X-Forwarded-For" -> "127.0.0.1", "X-Real-Ip" -> "127.0.0.1", "Forwarded" -> "for=127.0.0.1") do
        assert(refusal(request(HttpMethods.GET, from = Some(remote), path = "/admin/counts", sent = Seq(claim))).isDefined, claim)
    }

    "refuse a call with no socket of its own, or that came through a tunnel, even from loopback" in {
      assert(refusal(request(HttpMethods.GET, from = None, path = "/admin/counts")).isDefined)
      assert(refusal(request(HttpMethods.GET, path = "/admin/counts"), tunnelled = true).isDefined)
    }

    "answer a loopback caller whatever X-Forwarded-For claims" in {
      assert(refusal(request(sent = Seq("X-Forwarded-For" -> "10.0.0.1", "X-Real-Ip" -> "10.0.0.1"))).isEmpty)
    }

    "take a state-changing call without Origin, or from its own loopback origin" in {
      assert(refusal(request()).isEmpty)
      assert(refusal(request(sent = Seq("Origin" -> "http://127.0.0.1:8080", "Sec-Fetch-Site" -> "same-origin"))).isEmpty)
      assert(refusal(request(host = "localhost:8080", sent = Seq("Origin" -> "http://localhost:8080"))).isEmpty)
      assert(refusal(request(from = Some(InetSocketAddress(InetAddress.getByName("::1"), 40000)), host = "[::1]:8080",
        sent = Seq("Origin" -> "http://[0:0:0:0:0:0:0:1]:8080"))).isEmpty)
      assert(refusal(request(scheme = "https", host = "127.0.0.1", sent = Seq("Origin" -> "https://127.0.0.1:443"))).isEmpty)
      assert(refusal(request(sent = Seq("Sec-Fetch-Site" -> "none"))).isEmpty) // typed into the address bar
    }

    "refuse a state-changing call from a page of another origin or site" in {
      val foreign = Seq(
        request(sent = Seq("Origin" -> "http://evil.example")),
        request(host = "evil.example:8080", sent = Seq("Origin" -> "http://evil.example:8080")), // its name rebound to 127.0.0.1
        request(sent = Seq("Origin" -> "null")),
        request(sent = Seq("Origin" -> "http://127.0.0.1:9090")), // another port, another origin
        request(sent = Seq("Origin" -> "https://127.0.0.1:8080")),
        request(sent = Seq("Origin" -> "http://localhost:8080")), // not the Host it called
        request(sent = Seq("Origin" -> "http://127.0.0.1:8080", "Origin" -> "http://evil.example")),
        request(sent = Seq("Origin" -> "not an origin")),
        request(sent = Seq("Sec-Fetch-Site" -> "cross-site")),
        request(sent = Seq("Sec-Fetch-Site" -> "same-site", "Origin" -> "http://127.0.0.1:8080")),
        request(HttpMethods.PUT, path = "/admin/faults", sent = Seq("Origin" -> "http://evil.example")),
        request(HttpMethods.DELETE, sent = Seq("Origin" -> "http://evil.example")),
        request(HttpMethods.PATCH, sent = Seq("Sec-Fetch-Site" -> "cross-site")))
      for r <- foreign do
        val why = refusal(r)
        assert(why.isDefined, s"${r.method.value} with ${r.headers.mkString(", ")}")
        assert(!why.get.contains('\n'))
    }

    "answer reads as before, whatever their origin" in {
      val read = request(HttpMethods.GET, path = "/admin/counts", sent = Seq("Origin" -> "http://evil.example", "Sec-Fetch-Site" -> "cross-site"))
      assert(refusal(read).isEmpty)
    }
  }

  "An API whose server the user bound to an address other hosts reach" should {
    "answer a caller on another host, and still refuse a page of another site" in {
      assert(refusal(request(from = Some(remote)), anyHost = true).isEmpty)
      assert(refusal(request(from = Some(remote), sent = Seq("Sec-Fetch-Site" -> "cross-site")), anyHost = true).isDefined)
      assert(refusal(request(from = Some(remote), sent = Seq("Origin" -> "http://evil.example")), anyHost = true).isDefined)
    }
  }

  "The controller's admin API" should {
    "through the controller's own routes, not take a caller on another host for one on loopback, nor record its claim as its address" in {
      val config = ConfigFactory.parseString(s"""fleetsim.controller.state-dir = "${java.nio.file.Files.createTempDirectory("fleetsim-controller")}"""")
        .withFallback(ConfigFactory.load()).resolve()
      withSystem(config) {
        val registry = Registry()
        val handle = Route.toFunction(ControllerRoutes(registry, ControllerSettings(config)).route)(using summon[ActorSystem[?]].classicSystem)
        def reply(r: HttpRequest) = Await.result(handle(r), 10.seconds)
        val claim = Seq("X-Forwarded-For" -> "127.0.0.1", "X-Real-Ip" -> "127.0.0.1")
        val seq = registry.configSeq
        assert(reply(request(HttpMethods.GET, from = Some(remote), path = "/admin/counts", sent = claim)).status == StatusCodes.Forbidden)
        assert(reply(request(from = Some(remote), sent = claim)).status == StatusCodes.Forbidden)
        assert(registry.configSeq == seq)
        val join = HttpEntity(ContentTypes.`application/json`, """{"mac":"02:00:00:00:00:2d","serial":"FS45","model":"FS-AP-100","firmware":"1.0.0"}""")
        assert(reply(request(from = Some(remote), path = "/api/v1/join", sent = claim).withEntity(join)).status == StatusCodes.OK)
        assert(registry.find("02:00:00:00:00:2d").map(_.address).contains("203.0.113.7"))
      }
    }
  }
