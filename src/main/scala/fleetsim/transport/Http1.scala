package fleetsim.transport

import org.apache.pekko.util.ByteString

import java.nio.charset.StandardCharsets.{US_ASCII, UTF_8}
import scala.concurrent.Future

/** HTTP/1.1 as a device speaks it: requests rendered straight to bytes, responses read straight
  * into [[Reply]]s. A device's calls are small and few in kind, and Pekko HTTP's request and
  * response model cost more CPU than everything else a device does (ADR docs/adr/0003).
  */
object Http1:
  /** Renders calls to `host` (the Host header: "name:port"). Host and User-Agent are fleetsim's
    * unless the profile's headers name them: then the profile's replace them, never sent twice.
    */
  final class Renderer(host: String):
    /** " HTTP/1.1", then fleetsim's own headers, by which of them the profile's headers replace (bit 0 Host, bit 1 User-Agent). */
    private val afterPath = Array.tabulate(4) { replaced =>
      val hostLine = if (replaced & 1) == 0 then s"Host: $host\r\n" else ""
      val agentLine = if (replaced & 2) == 0 then "User-Agent: fleetsim\r\n" else ""
      s" HTTP/1.1\r\n$hostLine$agentLine".getBytes(US_ASCII)
    }
    private val contentLength = "Content-Length: ".getBytes(US_ASCII)
    private val space = " ".getBytes(US_ASCII)
    private val crlf = "\r\n".getBytes(US_ASCII)
    private val methods = Map("GET" -> "GET", "POST" -> "POST", "PUT" -> "PUT").map((k, v) => k -> v.getBytes(US_ASCII))

    /** The request line, Host, the profile's headers, Content-Length when there is a body (or the
      * method carries one), then the body: one array of the exact size. Null when the request is
      * [[Request.unsafe]]: it must not reach the wire.
      */
    def render(request: Request): ByteString =
      if request.unsafe != null then null
      else
        val method = methods.getOrElse(request.method, request.method.getBytes(US_ASCII))
        val path = target(request.path)
        val own = afterPath(replaced(request.headers))
        val body = request.body
        if body.isEmpty && !carriesBody(request.method) then concat(method, space, path, own, request.headers, crlf)
        else concat(method, space, path, own, request.headers, contentLength, body.length.toString.getBytes(US_ASCII), crlf, crlf, body)

    private def carriesBody(method: String): Boolean = method == "POST" || method == "PUT" || method == "PATCH"

    /** Which of Host (1) and User-Agent (2) the header lines name, by the first letters of each line. */
    private def replaced(headers: Array[Byte]): Int =
      var found = 0
      var at = 0
      while at < headers.length do
        if startsWith(headers, at, "host:") then found |= 1
        else if startsWith(headers, at, "user-agent:") then found |= 2
        while at < headers.length && headers(at) != '\n' do at += 1
        at += 1
      found

    private def startsWith(bytes: Array[Byte], at: Int, lower: String): Boolean =
      var i = 0
      while i < lower.length && at + i < bytes.length && (bytes(at + i) | 0x20) == lower.charAt(i) do i += 1
      i == lower.length

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

  private val unsafeReply = Future.successful(Reply.Failed(FailureReason.UnsafeValue))

  /** A body's bytes as an array. A body is a slice of what was read, and Pekko's `toArray` copies
    * one through a ClassTag it looks up on each call (5% of a 100,000-device fleet's Java samples).
    */
  private def arrayOf(body: ByteString): Array[Byte] =
    if body.isEmpty then Array.emptyByteArray
    else
      val array = new Array[Byte](body.length)
      body.copyToArray(array, 0, array.length)
      array

  /** A call that must not reach the wire ([[Request.unsafe]]): it fails, and the log says why. */
  def refuse(request: Request): Future[Reply] =
    Complaints.warn(FailureReason.UnsafeValue.key, s"a ${request.kind.key} call was not sent: ${request.unsafe}; it fails as unsafeValue")
    unsafeReply

  /** A path as a request target: a byte that cannot stand in one (a space, a control character such
    * as CR or LF, DEL, anything beyond ASCII) is percent-encoded, so no value read from a reply can
    * end the request line or start another. A path that needs none (nearly all) is copied as it is.
    */
  def target(path: String): Array[Byte] =
    var i = 0
    while i < path.length && { val c = path.charAt(i); c > ' ' && c < 0x7f } do i += 1
    if i == path.length then path.getBytes(US_ASCII)
    else
      val utf8 = path.getBytes(UTF_8)
      val out = java.io.ByteArrayOutputStream(utf8.length + 16)
      for b <- utf8 do
        val c = b & 0xff
        if c > ' ' && c < 0x7f then out.write(c)
        else
          out.write('%')
          out.write(Hex(c >> 4))
          out.write(Hex(c & 0xf))
      out.toByteArray

  private val Hex = "0123456789ABCDEF".getBytes(US_ASCII)

  /** A reply that is not HTTP/1.1 as RFC 9112 frames it: the connection can carry nothing more.
    * Without a stack trace: it is the server's mistake, said in one line.
    */
  final class MalformedResponse(what: String) extends RuntimeException(s"malformed HTTP response: $what", null, false, false)

  /** A reply past one of the profile's [[ReplyLimits]]: the connection is closed rather than read further. */
  final class TooLarge(what: String) extends RuntimeException(s"reply too large: $what", null, false, false)

  /** The part of a response the parser is reading. */
  private enum Part:
    case Head, FixedBody, ChunkSize, ChunkData, Trailers, UntilClose

  /** Longest chunk-size line read: sixteen hex digits and room for extensions. */
  private val ChunkLine = 1024

  /** Reads a connection's pipelined responses into replies, in order, as its bytes come. Bodies are
    * delimited by Content-Length, chunked transfer coding, or the end of the connection. After the
    * last response a connection carries — one that says `Connection: close`, an HTTP/1.0 one without
    * keep-alive, or the first with `oneResponse` — it is [[finished]] and reads nothing more: the
    * server reads nothing behind it. A reply that breaks the framing throws [[MalformedResponse]],
    * one past `limits` [[TooLarge]], as soon as the bytes read show it.
    *
    * One connection's: its reads come one after another, never two at once.
    *
    * @param closing called once the last response is read, before its reply is handed on, so the
    *                connection is known to be closing before anyone acts on that reply
    * @param written how many requests the connection has written: bytes that follow the reply to
    *                the last of them answer no request (a Content-Length that lied), and RFC 9112
    *                §6.3 forbids reading them as a response, so they end the connection
    */
  final class ResponseReader(limits: ReplyLimits = ReplyLimits.Default, oneResponse: Boolean = false, closing: () => Unit = () => (),
      written: () => Long = () => Long.MaxValue):
    import Part.*
    private var reading = Head
    private var buffer = ByteString.empty
    private var status = 0
    private var head = ByteString.empty // a view of the bytes read, not a copy
    private var remaining = 0L // bytes of the body (FixedBody) or of the chunk and its CRLF (ChunkData)
    private var body = ByteString.empty
    private var trailerLines = 0
    private var parsed = 0L // final responses read
    private var closeAfter = false
    private var done = false // the last response the connection carries is read

    /** The last response the connection carries is read: what follows it is not read. */
    def finished: Boolean = done

    /** Reads `chunk`, handing each reply it completes to `reply`, in order. A mistake throws once the
      * replies before it are handed on.
      */
    def read(chunk: ByteString, reply: Reply => Unit): Unit =
      if !done then
        // One array, so that reading a byte at an index is quick: a response left over from the last read is small.
        buffer = if buffer.isEmpty then chunk else (buffer ++ chunk).compact
        while !done && step(reply) do ()

    /** The server closed the connection: a body read until the close is a reply now; a response
      * broken off throws [[MalformedResponse]].
      */
    def end(reply: Reply => Unit): Unit =
      if reading == UntilClose && !done then
        val last = Reply.Response(status, arrayOf(body ++ buffer), head)
        done = true
        closing()
        reply(last)
      else if midResponse then malformed("the connection closed in the middle of a response")

    /** What a connection that broke means: a reply broken off, when it broke in the middle of one. */
    def broke(e: Throwable): Throwable =
      if midResponse then MalformedResponse(s"the connection broke in the middle of a response (${e.getMessage})") else e

    /** Some of a response is read, not all. */
    private def midResponse: Boolean = !done && (reading != Head || buffer.nonEmpty)

    /** Consumes what it can of the buffer; false when it needs more bytes. */
    private def step(reply: Reply => Unit): Boolean = reading match
      case Head =>
        if buffer.nonEmpty && parsed >= written() then malformed("bytes after the reply to the last call, which answer no call (a Content-Length that lied?)")
        val end = headEnd()
        if end < 0 then
          unfinishedHead()
          false
        else
          readHead(end)
          head = buffer.take(end)
          buffer = buffer.drop(end + 4)
          true
      case FixedBody =>
        buffer.length >= remaining && {
          body = buffer.take(remaining.toInt)
          buffer = buffer.drop(remaining.toInt)
          complete(reply)
          true
        }
      case ChunkSize =>
        val eol = buffer.indexOf('\n'.toByte)
        if eol < 0 then
          if buffer.length > ChunkLine then malformed(s"a chunk-size line of over $ChunkLine bytes")
          false
        else
          val size = buffer.take(eol).decodeString(US_ASCII).takeWhile(c => c != ';' && c != '\r').trim
          buffer = buffer.drop(eol + 1)
          if size.isEmpty || size.length > 15 || !size.forall(Character.digit(_, 16) >= 0) then malformed(s"chunk size '${size.take(20)}'")
          remaining = java.lang.Long.parseLong(size, 16)
          if body.length + remaining > limits.body then tooLarge(s"a chunked body of over ${limits.body} bytes")
          if remaining == 0 then
            trailerLines = 0
            reading = Trailers
          else
            remaining += 2
            reading = ChunkData
          true
      case ChunkData =>
        buffer.length >= remaining && {
          val data = remaining.toInt - 2
          if buffer(data) != '\r' || buffer(data + 1) != '\n' then malformed("a chunk longer than its size says")
          body = body ++ buffer.take(data)
          buffer = buffer.drop(remaining.toInt)
          reading = ChunkSize
          true
        }
      case Trailers =>
        val eol = buffer.indexOf('\n'.toByte)
        if eol < 0 then
          if buffer.length > limits.head then tooLarge(s"a trailer line of over ${limits.head} bytes")
          false
        else
          val blank = eol <= 1
          buffer = buffer.drop(eol + 1)
          trailerLines += 1
          if trailerLines > limits.headers then tooLarge(s"over ${limits.headers} trailer lines")
          if blank then complete(reply)
          true
      case UntilClose =>
        body = body ++ buffer
        buffer = ByteString.empty
        if body.length > limits.body then tooLarge(s"a body of over ${limits.body} bytes")
        false

    /** Index of the CRLF CRLF that ends the head, or -1. */
    private def headEnd(): Int =
      var i = buffer.indexOf('\n'.toByte)
      while i >= 0 && !(i >= 3 && buffer(i - 1) == '\r' && buffer(i - 2) == '\n' && buffer(i - 3) == '\r') do
        i = buffer.indexOf('\n'.toByte, i + 1)
      if i < 0 then -1 else i - 3

    /** A head not ended yet: bytes that cannot start a response, or more than the limits allow, fail now. */
    private def unfinishedHead(): Unit =
      val prefix = buffer.length.min(7)
      if !matches(0, "http/1.".take(prefix)) then malformed(s"status line '${text(0, lineEnd(0, buffer.length).min(40))}'")
      val eol = buffer.indexOf('\n'.toByte)
      if (if eol < 0 then buffer.length else eol) > limits.statusLine then tooLarge(s"a status line of over ${limits.statusLine} bytes")
      if buffer.length > limits.head then tooLarge(s"a status line and headers of over ${limits.head} bytes")

    /** Reads the head in `buffer(0 until end)` on the bytes: a million devices' responses are
      * too many to decode, split and lower-case, and only three headers matter.
      */
    private def readHead(end: Int): Unit =
      val statusEnd = lineEnd(0, end)
      if statusEnd > limits.statusLine then tooLarge(s"a status line of over ${limits.statusLine} bytes")
      if end > limits.head then tooLarge(s"a status line and headers of over ${limits.head} bytes")
      // HTTP/1.x SP 3DIGIT [SP reason]: RFC 9112 §4.
      if statusEnd < 12 || !matches(0, "http/1.") || (buffer(7) != '0' && buffer(7) != '1') || buffer(8) != ' ' ||
        !(isDigit(buffer(9)) && isDigit(buffer(10)) && isDigit(buffer(11))) || (statusEnd > 12 && buffer(12) != ' ')
      then malformed(s"status line '${text(0, statusEnd.min(40))}'")
      status = (buffer(9) - '0') * 100 + (buffer(10) - '0') * 10 + (buffer(11) - '0')
      if status < 100 || status > 599 then malformed(s"status $status")
      if status == 101 then malformed("101 Switching Protocols, which no call asks for")
      closeAfter = buffer(7) == '0' // HTTP/1.0: closes unless it says keep-alive
      var length = -1L
      var chunked = false
      var lines = 0
      var line = statusEnd + 2
      while line < end do
        val eol = lineEnd(line, end)
        lines += 1
        if lines > limits.headers then tooLarge(s"over ${limits.headers} header lines")
        val colon = buffer.indexOf(':'.toByte, line)
        if colon > line && colon < eol then
          val name = colon - line
          def value = fieldValue(colon + 1, eol)
          if name == 14 && matches(line, "content-length") then
            val v = value
            if v.isEmpty || v.length > 18 || !v.forall(isDigit(_)) then malformed(s"Content-Length '${v.take(20)}'")
            if length >= 0 && length != v.toLong then malformed("two different Content-Lengths")
            length = v.toLong
          else if name == 17 && matches(line, "transfer-encoding") then chunked = value.toLowerCase.endsWith("chunked")
          else if name == 10 && matches(line, "connection") then
            closeAfter = value.equalsIgnoreCase("close") || (closeAfter && !value.equalsIgnoreCase("keep-alive"))
        else if !isBlank(buffer(line)) then // not a folded line (RFC 9112 §5.2): not a header
          malformed(s"header line '${text(line, eol.min(line + 40))}'")
        line = eol + 2
      body = ByteString.empty
      if status / 100 == 1 then reading = Head // an interim response, 100 Continue: the real one follows
      else if status == 204 || status == 304 then { remaining = 0; reading = FixedBody }
      else if chunked then reading = ChunkSize
      else if length >= 0 then
        if length > limits.body then tooLarge(s"a body of $length bytes, over ${limits.body}")
        remaining = length
        reading = FixedBody
      else reading = UntilClose

    /** A header's value between `from` and `until`, without the spaces and tabs around it (RFC
      * 9110 §5.5): a tab there made `Content-Length:\t2` malformed and `Connection:\tclose` not a close.
      */
    private def fieldValue(from: Int, until: Int): String =
      var start = from
      while start < until && isBlank(buffer(start)) do start += 1
      var end = until
      while end > start && isBlank(buffer(end - 1)) do end -= 1
      text(start, end)

    /** Whether the buffer holds `lower` at `at`, ignoring the case of letters. */
    private def matches(at: Int, lower: String): Boolean =
      var i = 0
      while i < lower.length && (buffer(at + i) | 0x20) == lower.charAt(i) do i += 1
      i == lower.length

    private def isDigit(c: Char): Boolean = c >= '0' && c <= '9'
    private def isDigit(b: Byte): Boolean = b >= '0' && b <= '9'
    /** A space or a tab: HTTP's whitespace within a line (RFC 9110 §5.6.3). */
    private def isBlank(b: Byte): Boolean = b == ' ' || b == '\t'

    /** Where the line from `from` ends: its CR, or `end`. */
    private def lineEnd(from: Int, end: Int): Int =
      val cr = buffer.indexOf('\r'.toByte, from)
      if cr < 0 || cr > end then end else cr

    private def text(from: Int, until: Int): String =
      buffer.slice(from, until).decodeString(US_ASCII).map(c => if c < ' ' || c > '~' then '?' else c)

    private def complete(reply: Reply => Unit): Unit =
      val response = Reply.Response(status, arrayOf(body), head)
      parsed += 1
      body = ByteString.empty
      reading = Head
      if closeAfter || oneResponse then
        done = true
        closing()
      reply(response)

    private def malformed(what: String): Nothing = throw MalformedResponse(what)
    private def tooLarge(what: String): Nothing = throw TooLarge(what)
