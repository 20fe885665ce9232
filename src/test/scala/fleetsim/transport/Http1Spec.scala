package fleetsim.transport

import org.apache.pekko.util.ByteString
import org.scalatest.wordspec.AnyWordSpec

import java.nio.charset.StandardCharsets.US_ASCII
import scala.collection.mutable.ArrayBuffer
import scala.util.Try

/** The HTTP/1.1 codec on bytes as servers send them: pipelined, split anywhere, chunked or not. */
class Http1Spec extends AnyWordSpec:
  /** The replies `reader` reads from `chunks`, as a connection's reads, then the server's close;
    * what it threw, if it threw.
    */
  private def read(chunks: Seq[String], reader: Http1.ResponseReader = Http1.ResponseReader()): (Seq[Reply], Option[Throwable]) =
    val replies = ArrayBuffer.empty[Reply]
    val thrown = Try {
      chunks.foreach(chunk => reader.read(ByteString(chunk), replies += _))
      reader.end(replies += _)
    }.failed.toOption
    (replies.toSeq, thrown)

  private def parse(chunks: String*): Seq[Reply] =
    val (replies, thrown) = read(chunks)
    thrown.foreach(e => fail(e))
    replies

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
    "read headers with spaces and tabs around their values" in {
      assert(parse("HTTP/1.1 200 OK\r\nContent-Length:\t 2 \t\r\n\r\n{}").map(text) == Seq("{}"))
      // A tab before close is still a close: the reply after it is not read.
      assert(parse("HTTP/1.1 200 OK\r\nConnection:\tclose\r\nContent-Length: 1\r\n\r\nA", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nB").map(text) == Seq("A"))
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
      assert(failure(Seq("SSH-2.0-OpenSSH_9.2\r\n\r\n")).getMessage.contains("malformed HTTP response"))
    }
    "fail as soon as the first bytes cannot start a response, without waiting for a head that never ends" in {
      assert(failure(Seq("garbage with no end")).isInstanceOf[Http1.MalformedResponse])
    }
    "refuse what breaks the framing: a negative or lying length, a status of 999, a chunk longer than it says, a close mid-body" in {
      val cases = Seq(
        Seq("HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\nhello") -> "Content-Length '-5'",
        Seq("HTTP/1.1 200 OK\r\nContent-Length: \t\r\n\r\n") -> "Content-Length ''",
        Seq("HTTP/1.1 200 OK\r\nContent-Length: 1 2\r\n\r\n") -> "Content-Length '1 2'",
        Seq("HTTP/1.1 200 OK\r\nContent-Length: 1234567890123456789\r\n\r\n") -> "Content-Length '1234567890123456789'",
        Seq("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nabc") -> "two different Content-Lengths",
        Seq("HTTP/1.1 999 Odd\r\nContent-Length: 0\r\n\r\n") -> "status 999",
        Seq("HTTP/1.1 20 OK\r\n\r\n") -> "status line",
        Seq("HTTP/1.1 200 OK\r\nno colon here\r\n\r\n") -> "header line",
        Seq("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabcdef\r\n0\r\n\r\n") -> "a chunk longer than its size says",
        Seq("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n") -> "chunk size 'zz'",
        Seq("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort") -> "closed in the middle of a response",
        Seq("HTTP/1.1 200 OK\r\nContent-Le") -> "closed in the middle of a response")
      for (chunks, says) <- cases do
        val e = failure(chunks)
        assert(e.isInstanceOf[Http1.MalformedResponse] && e.getMessage.contains(says), s"$chunks: $e")
        assert(e.getStackTrace.isEmpty, "the server's mistake is one line, not a stack trace")
    }
    "give up on a reply past its limits, as soon as the bytes show it" in {
      val small = ReplyLimits(statusLine = 64, headers = 3, head = 256, body = 100)
      val cases = Seq(
        Seq(s"HTTP/1.1 200 ${"O" * 100}") -> "status line",
        Seq("HTTP/1.1 200 OK\r\n" + "X-A: 1\r\n" * 4 + "\r\n") -> "header lines",
        Seq("HTTP/1.1 200 OK\r\nX-Big: " + "b" * 300) -> "headers of over 256",
        Seq("HTTP/1.1 200 OK\r\nContent-Length: 101\r\n\r\n") -> "a body of 101 bytes",
        Seq("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", "40\r\n" + "c" * 64 + "\r\n", "40\r\n") -> "chunked body",
        Seq("HTTP/1.1 200 OK\r\n\r\n", "u" * 101) -> "a body of over 100")
      for (chunks, says) <- cases do
        val e = failure(chunks, small)
        assert(e.isInstanceOf[Http1.TooLarge] && e.getMessage.contains(says), s"$chunks: $e")
      // At the limit is within it.
      val (atLimit, thrown) = read(Seq("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + "x" * 100), Http1.ResponseReader(small))
      assert(atLimit.size == 1 && thrown.isEmpty)
    }
    "say that the connection closes before the last reply is emitted, and read nothing after it" in {
      var saidAt = -1
      val seen = scala.collection.mutable.ArrayBuffer.empty[Reply]
      val reader = Http1.ResponseReader(closing = () => saidAt = seen.size)
      reader.read(ByteString("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nAHTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\nB"), seen += _)
      reader.read(ByteString("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nC"), seen += _)
      reader.end(seen += _)
      assert(seen.map(text) == Seq("A", "B") && reader.finished)
      assert(saidAt == 1, "said before B, the last, was handed on")
    }
    "refuse bytes after the reply to the last call written, which answer no call" in {
      val (before, stray) = read(Seq("HTTP/1.1 500 Oops\r\nContent-Length: 2\r\n\r\n{}HTTP/1.1 200 OK\r\nX-Stray: "), Http1.ResponseReader(written = () => 1))
      assert(before.size == 1 && stray.exists(_.getMessage.contains("bytes after the reply to the last call")), stray)
      // Two calls written: the second reply is no stray.
      val (two, thrown) = read(Seq("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nAHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nB"), Http1.ResponseReader(written = () => 2))
      assert(two.map(text) == Seq("A", "B") && thrown.isEmpty)
    }
    "end after the first response when the connection carries one call" in {
      val (replies, thrown) = read(Seq("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nAHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nB"), Http1.ResponseReader(oneResponse = true))
      assert(replies.map(text) == Seq("A") && thrown.isEmpty)
    }
  }

  private def failure(chunks: Seq[String], limits: ReplyLimits = ReplyLimits.Default): Throwable =
    read(chunks, Http1.ResponseReader(limits))._2.getOrElse(fail(s"$chunks read without a mistake"))

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
    "send a profile's Host and User-Agent instead of its own, never two" in {
      val headers = "user-agent: agent/1.0\r\nX-Key: k\r\nHost: controller.example\r\n".getBytes(US_ASCII)
      val get = renderer.render(Request(kind, "GET", "/x", headers, Array.emptyByteArray)).utf8String
      assert(get == "GET /x HTTP/1.1\r\nuser-agent: agent/1.0\r\nX-Key: k\r\nHost: controller.example\r\n\r\n")
      val agentOnly = renderer.render(Request(kind, "GET", "/x", "User-Agent: a\r\n".getBytes(US_ASCII), Array.emptyByteArray)).utf8String
      assert(agentOnly == "GET /x HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: a\r\n\r\n")
    }
    "percent-encode what cannot stand in a path, so no value ends the request line" in {
      val get = renderer.render(Request(kind, "GET", "/d/x HTTP/1.1\r\nHost: h\r\n\r\nGET /smuggled?é", Array.emptyByteArray, Array.emptyByteArray))
      assert(get.utf8String.linesIterator.next() == "GET /d/x%20HTTP/1.1%0D%0AHost:%20h%0D%0A%0D%0AGET%20/smuggled?%C3%A9 HTTP/1.1")
      assert(get.utf8String.split("\r\n").count(_.startsWith("GET")) == 1)
    }
    "render nothing for a call that is unsafe to send" in {
      assert(renderer.render(Request(kind, "GET", "/x", Array.emptyByteArray, Array.emptyByteArray, unsafe = "header X holds CR")) == null)
    }
  }
