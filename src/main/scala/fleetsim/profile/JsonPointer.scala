package fleetsim.profile

import com.github.plokhotnyuk.jsoniter_scala.core.*

/** Where a value sits in a JSON reply (RFC 6901), compiled once and read from each reply's bytes
  * in one pass that skips everything off the path without building a tree.
  */
final class JsonPointer private (val text: String, tokens: Array[JsonPointer.Token]):
  private val codec = new JsonValueCodec[String]:
    def nullValue: String = null
    def decodeValue(in: JsonReader, default: String): String = find(in, 0)
    def encodeValue(x: String, out: JsonWriter): Unit = throw UnsupportedOperationException("a JSON pointer only reads")

  /** The value at the pointer as text — a string's content, a number's or boolean's literal — or
    * null when the reply is not JSON, nothing is there, or the value is an object, array or null.
    */
  def read(json: Array[Byte]): String =
    try readFromArray(json)(codec)
    catch case _: JsonReaderException => null

  private def find(in: JsonReader, depth: Int): String =
    if depth == tokens.length then leaf(in)
    else
      val token = tokens(depth)
      var found: String = null
      if in.isNextToken('{') then
        if !in.isNextToken('}') then
          in.rollbackToken()
          var more = true
          while more do
            // Keys compared in the reader's buffer: no String per key. The first of duplicate keys wins.
            val keyLength = in.readKeyAsCharBuf()
            if found == null && in.isCharBufEqualsTo(keyLength, token.key) then found = find(in, depth + 1)
            else in.skip()
            more = in.isNextToken(',')
            if !more && !in.isCurrentToken('}') then in.objectEndOrCommaError()
      else if in.isCurrentToken('[') then
        if !in.isNextToken(']') then
          in.rollbackToken()
          var i = 0
          var more = true
          while more do
            if i == token.index then found = find(in, depth + 1) else in.skip()
            i += 1
            more = in.isNextToken(',')
            if !more && !in.isCurrentToken(']') then in.arrayEndOrCommaError()
      else
        in.rollbackToken()
        in.skip()
      found

  private def leaf(in: JsonReader): String =
    val b = in.nextToken()
    in.rollbackToken()
    b.toChar match
      case '"' => in.readString(null)
      case 't' | 'f' => if in.readBoolean() then "true" else "false"
      case 'n' => in.readNullOrError[String](null, "expected null")
      case '{' | '[' =>
        in.skip()
        null
      case _ =>
        // Checked as a JSON number first (skipping alone would take "1x2"), then taken as written.
        in.setMark()
        in.readDouble()
        in.rollbackToMark()
        String(in.readRawValAsBytes(), java.nio.charset.StandardCharsets.US_ASCII)

  override def toString: String = text

object JsonPointer:
  /** One step of a pointer: an object's key, or an array's index when the key is one (else -1). */
  private final case class Token(key: String, index: Int)

  private val Index = "0|[1-9][0-9]{0,8}".r
  private val LoneTilde = "~(?![01])".r

  /** "" is the whole document; otherwise each step follows a /, with ~1 for / and ~0 for ~ in keys. */
  def compile(pointer: String): Either[String, JsonPointer] =
    if pointer.isEmpty then Right(JsonPointer(pointer, Array.empty))
    else if !pointer.startsWith("/") then Left(s"a JSON pointer starts with / (got '$pointer')")
    else
      val steps = pointer.substring(1).split("/", -1)
      steps.find(LoneTilde.findFirstIn(_).isDefined) match
        case Some(step) => Left(s"in a JSON pointer ~ is written ~0 and / is written ~1 (got '$step' in '$pointer')")
        case None =>
          val tokens = steps.map { step =>
            val key = step.replace("~1", "/").replace("~0", "~")
            Token(key, if Index.matches(key) then key.toInt else -1)
          }
          Right(JsonPointer(pointer, tokens))
