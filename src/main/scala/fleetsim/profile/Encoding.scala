package fleetsim.profile

import java.nio.charset.StandardCharsets.UTF_8
import java.security.MessageDigest
import javax.crypto.Mac

/** One thread's buffers and digests for rendering. Nothing here is held across a call into a
  * Variable, so a variable that renders a template of its own cannot overwrite a buffer in use.
  */
private[profile] final class Scratch:
  /** The UTF-8 of a value being hashed or encoded; see `Encoding.utf8`. */
  var bytes = new Array[Byte](256)
  /** A value's text while it is escaped. */
  var chars = new Array[Char](256)
  /** A digest or MAC: 64 bytes is the longest of them. */
  val digest = new Array[Byte](64)
  lazy val hmac: Mac = Mac.getInstance("HmacSHA256")
  private val digests = new Array[MessageDigest](Hash.values.length)
  private var spare: java.lang.StringBuilder = java.lang.StringBuilder(1024)

  def byteBuffer(capacity: Int): Array[Byte] =
    if bytes.length < capacity then bytes = new Array(capacity.max(bytes.length * 2))
    bytes

  def charBuffer(capacity: Int): Array[Char] =
    if chars.length < capacity then chars = new Array(capacity.max(chars.length * 2))
    chars

  def digester(hash: Hash): MessageDigest =
    if digests(hash.ordinal) == null then digests(hash.ordinal) = MessageDigest.getInstance(hash.algorithm)
    digests(hash.ordinal)

  /** The thread's builder, emptied; a new one while it is lent out (a variable rendering text of its own). */
  def borrowBuilder(): java.lang.StringBuilder =
    val builder = spare
    if builder == null then java.lang.StringBuilder(256)
    else
      spare = null
      builder.setLength(0)
      builder

  def giveBack(builder: java.lang.StringBuilder): Unit =
    // One huge body must not pin its builder's memory in every thread for good.
    if builder.capacity <= 64 * 1024 then spare = builder

private[profile] object Scratch:
  private val perThread = ThreadLocal.withInitial(() => Scratch())

  def get(): Scratch = perThread.get()

/** Text to bytes and back, and escaping in place, without a String per value on the usual paths. */
private[profile] object Encoding:
  private val LowerHex = "0123456789abcdef"
  private val UpperHex = "0123456789ABCDEF"
  private val Base64Digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
  private val PowersOfTen = Array.iterate(1L, 19)(_ * 10)

  /** The UTF-8 of `text`, exactly sized: ASCII byte by byte, anything else through the JDK's encoder. */
  def utf8(text: CharSequence): Array[Byte] =
    val length = text.length
    val bytes = new Array[Byte](length)
    var i = 0
    while i < length && text.charAt(i) < 0x80 do
      bytes(i) = text.charAt(i).toByte
      i += 1
    if i == length then bytes else text.toString.getBytes(UTF_8)

  /** The UTF-8 of text[from, to) into `scratch.bytes`; returns its length. */
  def utf8(text: CharSequence, from: Int, to: Int, scratch: Scratch): Int =
    val bytes = scratch.byteBuffer(to - from)
    var i = from
    while i < to && text.charAt(i) < 0x80 do
      bytes(i - from) = text.charAt(i).toByte
      i += 1
    if i == to then to - from
    else
      val encoded = text.subSequence(from, to).toString.getBytes(UTF_8)
      System.arraycopy(encoded, 0, scratch.byteBuffer(encoded.length), 0, encoded.length)
      encoded.length

  def appendHex(out: java.lang.StringBuilder, bytes: Array[Byte], length: Int): Unit =
    var i = 0
    while i < length do
      out.append(LowerHex.charAt((bytes(i) >> 4) & 15)).append(LowerHex.charAt(bytes(i) & 15))
      i += 1

  /** Standard alphabet, padded (java.util.Base64.getEncoder, which cannot encode part of an array). */
  def appendBase64(out: java.lang.StringBuilder, bytes: Array[Byte], length: Int): Unit =
    def digit(group: Int, shift: Int) = Base64Digits.charAt((group >>> shift) & 63)
    var i = 0
    while i + 2 < length do
      val group = (bytes(i) & 0xff) << 16 | (bytes(i + 1) & 0xff) << 8 | (bytes(i + 2) & 0xff)
      out.append(digit(group, 18)).append(digit(group, 12)).append(digit(group, 6)).append(digit(group, 0))
      i += 3
    if length - i == 1 then
      val group = (bytes(i) & 0xff) << 16
      out.append(digit(group, 18)).append(digit(group, 12)).append("==")
    else if length - i == 2 then
      val group = (bytes(i) & 0xff) << 16 | (bytes(i + 1) & 0xff) << 8
      out.append(digit(group, 18)).append(digit(group, 12)).append(digit(group, 6)).append('=')

  /** `unscaled` / 10^decimals, written with exactly `decimals` digits after the point. */
  def appendFixed(out: java.lang.StringBuilder, unscaled: Long, decimals: Int): Unit =
    if decimals == 0 then out.append(unscaled)
    else
      val scale = PowersOfTen(decimals)
      val magnitude = math.abs(unscaled)
      if unscaled < 0 then out.append('-')
      out.append(magnitude / scale).append('.')
      val fraction = magnitude % scale
      var place = scale / 10
      while place > 1 && fraction < place do
        out.append('0')
        place /= 10
      out.append(fraction)

  /** Makes what `out` holds from `from` on the inside of a JSON string: quote, backslash and control
    * characters escaped; everything else, numbers included, as it is.
    */
  def escapeJson(out: java.lang.StringBuilder, from: Int): Unit =
    val end = out.length
    var i = from
    while i < end && !needsJsonEscape(out.charAt(i)) do i += 1
    if i < end then
      val count = end - i
      val chars = Scratch.get().charBuffer(count)
      out.getChars(i, end, chars, 0)
      out.setLength(i)
      var j = 0
      while j < count do
        chars(j) match
          case '"' => out.append("\\\"")
          case '\\' => out.append("\\\\")
          case '\n' => out.append("\\n")
          case '\r' => out.append("\\r")
          case '\t' => out.append("\\t")
          case '\b' => out.append("\\b")
          case '\f' => out.append("\\f")
          case c if c < 0x20 => out.append("\\u00").append(LowerHex.charAt(c >> 4)).append(LowerHex.charAt(c & 15))
          case c => out.append(c)
        j += 1

  private def needsJsonEscape(c: Char) = c < 0x20 || c == '"' || c == '\\'

  /** Form-encodes what `out` holds from `from` on, as java.net.URLEncoder does with UTF-8. */
  def escapeUrl(out: java.lang.StringBuilder, from: Int): Unit =
    val end = out.length
    var i = from
    while i < end && isUrlSafe(out.charAt(i)) do i += 1
    if i < end then
      val scratch = Scratch.get()
      val length = utf8(out, i, end, scratch)
      out.setLength(i)
      var j = 0
      while j < length do
        val b = scratch.bytes(j)
        if b == ' ' then out.append('+')
        else if b >= 0 && isUrlSafe(b.toChar) then out.append(b.toChar)
        else out.append('%').append(UpperHex.charAt((b >> 4) & 15)).append(UpperHex.charAt(b & 15))
        j += 1

  private def isUrlSafe(c: Char) =
    (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '*' || c == '_'
