package fleetsim.transport

import org.apache.pekko.actor.testkit.typed.scaladsl.ScalaTestWithActorTestKit
import org.apache.pekko.stream.scaladsl.{Sink, Source}
import org.apache.pekko.util.ByteString
import org.scalatest.wordspec.AnyWordSpecLike

import java.nio.charset.StandardCharsets.US_ASCII
import scala.concurrent.duration.*

/** The HTTP/1.1 codec on bytes as servers send them: pipelined, split anywhere, chunked or not. */
class Http1Spec extends ScalaTestWithActorTestKit with AnyWordSpecLike:
  private def parse(chunks: String*): Seq[Reply] =
    Source(chunks.map(ByteString(_))).via(Http1.ResponseParser()).runWith(Sink.seq).futureValue

  private def text(reply: Reply): String = reply match
    case Reply.Response(200 | 204, body, _) => String(body, US_ASCII)
    case other => fail(s"expected Ok, got $other")

  private val two =
    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 13\r\n\r\n{\"configSeq\":1}".replace("13", "15") +
      "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}"

  "The response parser" should {
    "read pipelined responses in order, however the bytes are split" in {
      for cut <- 1 until two.length do
        val replies = parse(two.take(cut), two.drop(cut))
        assert(replies.map(text) == Seq("{\"configSeq\":1}", "{}"), s"split at $cut")
    }
    "read a chunked body with extensions and trailers" in {
      val chunked = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4;x=y\r\n{\"co\r\n7\r\nnfigSeq\r\n4\r\n\":2}\r\n0\r\nX-Trailer: t\r\n\r\n"
      val replies = parse(chunked + "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
      assert(replies.map(text) == Seq("{\"configSeq\":2}", ""))
    }
    "keep every status, with the head to read headers from, and skip 100 Continue" in {
      val replies = parse(
        "HTTP/1.1 403 Forbidden\r\nContent-Length: 5\r\n\r\nnope!",
        "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n",
        "HTTP/1.1 204 No Content\r\n\r\n")
      assert(replies.collect { case r: Reply.Response => r.status } == Seq(403, 503, 204))
      assert(text(replies(2)) == "")
      val throttled = parse("HTTP/1.1 429 Too Many Requests\r\nretry-after:  7 \r\nContent-Length: 0\r\n\r\n").head.asInstanceOf[Reply.Response]
      assert(throttled.header("Retry-After") == "7" && throttled.header("X-Missing") == null)
    }
    "stop after a response that closes the connection, and read a body that ends with it" in {
      assert(parse("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\nA", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nB").map(text) == Seq("A"))
      assert(parse("HTTP/1.0 200 OK\r\n\r\nall ", "of it").map(text) == Seq("all of it"))
    }
    "fail on bytes that are not HTTP" in {
      val failed = Source.single(ByteString("SSH-2.0-OpenSSH_9.2\r\n\r\n")).via(Http1.ResponseParser()).runWith(Sink.seq)
      assert(failed.failed.futureValue.getMessage.contains("malformed HTTP response"))
    }
  }

  "The renderer" should {
    val renderer = Http1.Renderer("127.0.0.1:8080")
    val kind = MessageKind("heartbeat", 0, periodic = true)
    val json = "Content-Type: application/json\r\n".getBytes(US_ASCII)
    "send a POST with its headers, body and length, a GET with no body" in {
      val post = renderer.render(Request(kind, "POST", "/api/v1/devices/02:00:00:00:00:01/heartbeat", json, "{\"seq\":1}".getBytes(US_ASCII)))
      assert(post.utf8String == "POST /api/v1/devices/02:00:00:00:00:01/heartbeat HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: fleetsim\r\n" +
        "Content-Type: application/json\r\nContent-Length: 9\r\n\r\n{\"seq\":1}")
      val get = renderer.render(Request(kind, "GET", "/api/v1/devices/x/config", Array.emptyByteArray, Array.emptyByteArray))
      assert(get.utf8String == "GET /api/v1/devices/x/config HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: fleetsim\r\n\r\n")
      val emptyPost = renderer.render(Request(kind, "POST", "/x", Array.emptyByteArray, Array.emptyByteArray))
      assert(emptyPost.utf8String.endsWith("Content-Length: 0\r\n\r\n"))
    }
  }
