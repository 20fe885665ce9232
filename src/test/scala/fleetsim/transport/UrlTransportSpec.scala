package fleetsim.transport

import org.scalatest.wordspec.AnyWordSpec

/** Absolute URLs split into the server a transport is kept for and what is asked of it. */
class UrlTransportSpec extends AnyWordSpec:
  "UrlTransport.split" should {
    "give the server, with its default port, and the path with its query" in {
      assert(UrlTransport.split("http://127.0.0.1:8080/api/v1/config/7") == Some((("http", "127.0.0.1", 8080), "/api/v1/config/7")))
      assert(UrlTransport.split("https://cdn.example.com/fw?v=2&x=%20") == Some((("https", "cdn.example.com", 443), "/fw?v=2&x=%20")))
      assert(UrlTransport.split("http://127.0.0.1") == Some((("http", "127.0.0.1", 80), "/")))
    }
    "refuse what is not an http or https URL" in {
      Seq("", "/api/v1/config", "ftp://127.0.0.1/x", "http://", "not a url").foreach(u => assert(UrlTransport.split(u).isEmpty, u))
    }
  }
