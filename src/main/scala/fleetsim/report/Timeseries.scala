package fleetsim.report

import com.github.plokhotnyuk.jsoniter_scala.core.*
import fleetsim.metrics.Sample

import java.io.{BufferedWriter, OutputStreamWriter}
import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.{Files, Path, StandardOpenOption}
import scala.util.Try

/** timeseries.jsonl: one [[Sample]] per line, appended and flushed every second, so that a run
  * killed outright still leaves its data up to the last second.
  */
final class Timeseries private (writer: BufferedWriter) extends Output:
  override def sample(sample: Sample): Unit = synchronized {
    writer.write(writeToString(sample))
    writer.newLine()
    writer.flush()
  }

  override def finish(summary: Summary): Unit = synchronized(writer.close())

object Timeseries:
  val FileName = "timeseries.jsonl"

  def create(dir: Path): Timeseries =
    Files.createDirectories(dir)
    val out = Files.newOutputStream(dir.resolve(FileName), StandardOpenOption.CREATE, StandardOpenOption.APPEND)
    Timeseries(BufferedWriter(OutputStreamWriter(out, UTF_8)))

  /** The samples in a run's folder; a line cut short by a kill is skipped. */
  def read(dir: Path): Seq[Sample] =
    val file = dir.resolve(FileName)
    if !Files.exists(file) then Seq.empty
    else Files.readAllLines(file, UTF_8).toArray(Array.empty[String]).toSeq.flatMap(line => Try(readFromString[Sample](line)).toOption)
