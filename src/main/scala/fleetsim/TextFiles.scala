package fleetsim

import java.nio.charset.CodingErrorAction
import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.{Files, Path}
import java.nio.{ByteBuffer, CharBuffer}

/** Text files a user hands fleetsim (CSV files of tokens and ids), read strictly: a byte that is not
  * UTF-8 is named with its file:line, never replaced, never a stack trace.
  */
object TextFiles:
  /** The file's text, or what keeps it from being read, in words that say what to do. */
  def utf8(file: Path): Either[String, String] =
    try
      val bytes = Files.readAllBytes(file)
      val decoder = UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT).onUnmappableCharacter(CodingErrorAction.REPORT)
      val in = ByteBuffer.wrap(bytes)
      val out = CharBuffer.allocate(bytes.length)
      if decoder.decode(in, out, true).isError then
        val line = 1 + bytes.iterator.take(in.position()).count(_ == '\n')
        Left(f"$file:$line is not UTF-8 text (byte 0x${bytes(in.position()) & 0xff}%02x): save it as UTF-8")
      else Right(out.flip().toString)
    catch case e: java.io.IOException => Left(s"cannot read $file (${e.getClass.getSimpleName}: ${e.getMessage}): check that it is a file you may read")
