package fleetsim.transport

import org.apache.pekko.stream.stage.{GraphStage, GraphStageLogic, InHandler, OutHandler}
import org.apache.pekko.stream.{Attributes, FlowShape, Inlet, Outlet}
import org.apache.pekko.util.ByteString

import java.nio.charset.StandardCharsets.{US_ASCII, UTF_8}
import scala.collection.mutable.ArrayBuffer

/** HTTP/1.1 as a device speaks it: requests rendered straight to bytes, responses read straight
  * into [[Reply]]s. A device's calls are small and few in kind, and Pekko HTTP's request and
  * response model cost more CPU than everything else a device does (ADR docs/adr/0003).
  */
object Http1:
  /** Renders calls to `host` (the Host header: "name:port").
    *
    * @param close each call asks the server to close the connection after its reply
    */
  final class Renderer(host: String, close: Boolean = false):
    private val afterPath =
      s" HTTP/1.1\r\nHost: $host\r\nUser-Agent: fleetsim\r\n${if close then "Connection: close\r\n" else ""}".getBytes(US_ASCII)
    private val contentLength = "Content-Length: ".getBytes(US_ASCII)
    private val space = " ".getBytes(US_ASCII)
    private val crlf = "\r\n".getBytes(US_ASCII)
    private val methods = Map("GET" -> "GET", "POST" -> "POST", "PUT" -> "PUT").map((k, v) => k -> v.getBytes(US_ASCII))

    /** The request line, Host, the profile's headers, Content-Length when there is a body (or the
      * method carries one), then the body: one array of the exact size.
      */
    def render(request: Request): ByteString =
      val method = methods.getOrElse(request.method, request.method.getBytes(US_ASCII))
      val path = request.path.getBytes(UTF_8)
      val body = request.body
      if body.isEmpty && !carriesBody(request.method) then concat(method, space, path, afterPath, request.headers, crlf)
      else concat(method, space, path, afterPath, request.headers, contentLength, body.length.toString.getBytes(US_ASCII), crlf, crlf, body)

    private def carriesBody(method: String): Boolean = method == "POST" || method == "PUT" || method == "PATCH"

    // While loops: in the fleet, the for loops left an iterator per call (1.5% of all it allocated at 1M devices).
    private def concat(parts: Array[Byte]*): ByteString =
      var length = 0
      var i = 0
      while i < parts.length do
        length += parts(i).length
        i += 1
      val bytes = new Array[Byte](length)
      var at = 0
      i = 0
      while i < parts.length do
        System.arraycopy(parts(i), 0, bytes, at, parts(i).length)
        at += parts(i).length
        i += 1
      ByteString.fromArrayUnsafe(bytes)

  final class MalformedResponse(what: String) extends RuntimeException(what)

  /** The part of a response the parser is reading. */
  private enum Part:
    case Head, FixedBody, ChunkSize, ChunkData, Trailers, UntilClose

  /** Reads a stream of pipelined responses into replies, in order. Bodies are delimited by
    * Content-Length, chunked transfer coding, or the end of the connection. After a response that
    * says `Connection: close` the stage completes: the server reads nothing behind it.
    */
  final class ResponseParser extends GraphStage[FlowShape[ByteString, Reply]]:
    val in: Inlet[ByteString] = Inlet("Http1.ResponseParser.in")
    val out: Outlet[Reply] = Outlet("Http1.ResponseParser.out")
    val shape: FlowShape[ByteString, Reply] = FlowShape(in, out)

    def createLogic(attributes: Attributes): GraphStageLogic = new GraphStageLogic(shape) with InHandler with OutHandler:
      import Part.*
      private var reading = Head
      private var buffer = ByteString.empty
      private var status = 0
      private var head = ByteString.empty // a view of the bytes read, not a copy
      private var remaining = 0L // bytes of the body (FixedBody) or of the chunk and its CRLF (ChunkData)
      private var body = ByteString.empty
      private var closeAfter = false
      private var done = false // a response said Connection: close

      setHandlers(in, out, this)

      def onPush(): Unit =
        val chunk = grab(in)
        // One array, so that reading a byte at an index is quick: a response left over from the last read is small.
        buffer = if buffer.isEmpty then chunk else (buffer ++ chunk).compact
        val replies = ArrayBuffer.empty[Reply]
        while !done && step(replies) do ()
        if replies.isEmpty then (if done then completeStage() else pull(in))
        else emitMultiple(out, replies.iterator, () => if done then completeStage())

      def onPull(): Unit = if !hasBeenPulled(in) && !done then pull(in)

      override def onUpstreamFinish(): Unit =
        if reading == UntilClose then emit(out, Reply.Response(status, (body ++ buffer).toArrayUnsafe(), head), () => completeStage())
        else completeStage()

      /** Consumes what it can of the buffer; false when it needs more bytes. */
      private def step(replies: ArrayBuffer[Reply]): Boolean = reading match
        case Head =>
          val end = headEnd()
          end >= 0 && {
            readHead(end)
            head = buffer.take(end)
            buffer = buffer.drop(end + 4)
            true
          }
        case FixedBody =>
          buffer.length >= remaining && {
            body = buffer.take(remaining.toInt)
            buffer = buffer.drop(remaining.toInt)
            complete(replies)
            true
          }
        case ChunkSize =>
          val eol = buffer.indexOf('\n'.toByte)
          eol >= 0 && {
            val size = buffer.take(eol).decodeString(US_ASCII).takeWhile(c => c != ';' && c != '\r').trim
            buffer = buffer.drop(eol + 1)
            remaining = try java.lang.Long.parseLong(size, 16) catch case _: NumberFormatException => malformed(s"chunk size '$size'")
            if remaining == 0 then reading = Trailers else { remaining += 2; reading = ChunkData }
            true
          }
        case ChunkData =>
          buffer.length >= remaining && {
            body = body ++ buffer.take(remaining.toInt - 2)
            buffer = buffer.drop(remaining.toInt)
            reading = ChunkSize
            true
          }
        case Trailers =>
          val eol = buffer.indexOf('\n'.toByte)
          eol >= 0 && {
            val blank = eol <= 1
            buffer = buffer.drop(eol + 1)
            if blank then complete(replies)
            true
          }
        case UntilClose =>
          body = body ++ buffer
          buffer = ByteString.empty
          false

      /** Index of the CRLF CRLF that ends the head, or -1. */
      private def headEnd(): Int =
        var i = buffer.indexOf('\n'.toByte)
        while i >= 0 && !(i >= 3 && buffer(i - 1) == '\r' && buffer(i - 2) == '\n' && buffer(i - 3) == '\r') do
          i = buffer.indexOf('\n'.toByte, i + 1)
        if i < 0 then -1 else i - 3

      /** Reads the head in `buffer(0 until end)` on the bytes: a million devices' responses are
        * too many to decode, split and lower-case, and only three headers matter.
        */
      private def readHead(end: Int): Unit =
        if end < 12 || !matches(0, "http/1.") || !(isDigit(buffer(9)) && isDigit(buffer(10)) && isDigit(buffer(11))) then
          malformed(s"status line '${text(0, lineEnd(0, end).min(40))}'")
        status = (buffer(9) - '0') * 100 + (buffer(10) - '0') * 10 + (buffer(11) - '0')
        closeAfter = buffer(7) == '0' // HTTP/1.0
        var length = -1L
        var chunked = false
        var line = lineEnd(0, end) + 2
        while line < end do
          val eol = lineEnd(line, end)
          val colon = buffer.indexOf(':'.toByte, line)
          if colon > line && colon < eol then
            val name = colon - line
            def value = text(colon + 1, eol).trim
            if name == 14 && matches(line, "content-length") then
              length = try value.toLong catch case _: NumberFormatException => malformed(s"Content-Length '$value'")
            else if name == 17 && matches(line, "transfer-encoding") then chunked = value.toLowerCase.contains("chunked")
            else if name == 10 && matches(line, "connection") then
              closeAfter = value.equalsIgnoreCase("close") || (closeAfter && !value.equalsIgnoreCase("keep-alive"))
          line = eol + 2
        body = ByteString.empty
        if status / 100 == 1 then reading = Head // an interim response, 100 Continue: the real one follows
        else if status == 204 || status == 304 then { remaining = 0; reading = FixedBody }
        else if chunked then reading = ChunkSize
        else if length >= 0 then { remaining = length; reading = FixedBody }
        else reading = UntilClose

      /** Whether the buffer holds `lower` at `at`, ignoring the case of letters. */
      private def matches(at: Int, lower: String): Boolean =
        var i = 0
        while i < lower.length && (buffer(at + i) | 0x20) == lower.charAt(i) do i += 1
        i == lower.length

      private def isDigit(b: Byte): Boolean = b >= '0' && b <= '9'

      /** Where the line from `from` ends: its CR, or `end`. */
      private def lineEnd(from: Int, end: Int): Int =
        val cr = buffer.indexOf('\r'.toByte, from)
        if cr < 0 || cr > end then end else cr

      private def text(from: Int, until: Int): String = buffer.slice(from, until).decodeString(US_ASCII)

      private def complete(replies: ArrayBuffer[Reply]): Unit =
        replies += Reply.Response(status, body.toArrayUnsafe(), head)
        body = ByteString.empty
        reading = Head
        done = closeAfter

      private def malformed(what: String): Nothing = throw MalformedResponse(s"malformed HTTP response: $what")
