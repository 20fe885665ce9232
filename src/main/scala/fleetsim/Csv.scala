package fleetsim

import java.nio.file.Path
import scala.collection.mutable

/** A CSV file with a header, as users hand them to fleetsim: pre-provisioned ids, tokens, passwords. */
final case class Csv(columns: IndexedSeq[String], rows: IndexedSeq[IndexedSeq[String]])

object Csv:
  /** `file` read strictly ([[TextFiles.utf8]]): a header, and rows of as many fields; blank lines
    * are skipped. Left: what is wrong, with its file:line.
    */
  def read(file: Path): Either[String, Csv] =
    TextFiles.utf8(file).flatMap { text =>
      val lines = text.linesIterator.zipWithIndex.filter(_._1.trim.nonEmpty).toIndexedSeq
      if lines.isEmpty then Left(s"$file is empty; its first line names the columns")
      else
        val columns = split(lines.head._1).map(_.trim)
        val rows = lines.tail.map((line, i) => split(line) -> i)
        rows.find(_._1.size != columns.size) match
          case Some((row, i)) => Left(s"$file:${i + 1} has ${row.size} fields, the header ${columns.size}")
          case None => Right(Csv(columns, rows.map(_._1)))
    }

  /** One line's fields: commas separate, double quotes enclose (a doubled quote is one). */
  private def split(line: String): IndexedSeq[String] =
    val fields = mutable.ArrayBuffer.empty[String]
    val field = StringBuilder()
    var quoted = false
    var i = 0
    while i < line.length do
      val ch = line.charAt(i)
      if quoted then
        if ch == '"' && i + 1 < line.length && line.charAt(i + 1) == '"' then { field += '"'; i += 1 }
        else if ch == '"' then quoted = false
        else field += ch
      else if ch == '"' then quoted = true
      else if ch == ',' then { fields += field.toString; field.clear() }
      else field += ch
      i += 1
    fields += field.toString
    fields.toIndexedSeq
