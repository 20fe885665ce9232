package fleetsim.report

import java.nio.file.{Files, Path}
import javax.xml.stream.{XMLOutputFactory, XMLStreamWriter}

/** verdict.xml in the run's folder, written at the end when the run has thresholds: its verdict as
  * a JUnit XML report, the form CI systems read (Jenkins, GitLab, GitHub's test reporters): one
  * `testsuite` named fleetsim, one `testcase` a threshold, a `failure` for each that failed.
  */
final class VerdictFile(dir: Path) extends Output:
  override def finish(summary: Summary): Unit = summary.verdict.foreach(VerdictFile.write(_, summary.run, dir))

object VerdictFile:
  val FileName = "verdict.xml"

  def write(verdict: Verdict, run: RunInfo, dir: Path): Path =
    Files.createDirectories(dir)
    val file = dir.resolve(FileName)
    val out = Files.newOutputStream(file)
    try
      val xml = XMLOutputFactory.newInstance().createXMLStreamWriter(out, "UTF-8")
      def line(indent: Int): Unit = xml.writeCharacters("\n" + " " * indent)
      def attributes(xml: XMLStreamWriter, pairs: (String, String)*): Unit = pairs.foreach((k, v) => xml.writeAttribute(k, v))
      xml.writeStartDocument("UTF-8", "1.0")
      line(0)
      xml.writeStartElement("testsuite")
      attributes(xml, "name" -> "fleetsim", "tests" -> verdict.thresholds.size.toString, "failures" -> verdict.failed.toString,
        "errors" -> "0", "skipped" -> "0", "time" -> run.durationS.toString)
      line(2)
      xml.writeStartElement("properties")
      for (name, value) <- Seq("deviceProfile" -> run.deviceProfile, "transport" -> run.transport, "controllerUrl" -> run.controllerUrl,
          "startedAt" -> run.startedAt, "stopReason" -> run.stopReason) do
        line(4)
        xml.writeEmptyElement("property")
        attributes(xml, "name" -> name, "value" -> value)
      line(2)
      xml.writeEndElement()
      for judged <- verdict.thresholds do
        line(2)
        xml.writeStartElement("testcase")
        attributes(xml, "classname" -> "fleetsim.thresholds", "name" -> judged.threshold, "time" -> "0")
        if !judged.passed then
          line(4)
          xml.writeStartElement("failure")
          attributes(xml, "type" -> "threshold", "message" -> judged.message)
          xml.writeCharacters(judged.message)
          xml.writeEndElement()
          line(2)
        xml.writeEndElement()
      line(0)
      xml.writeEndElement()
      xml.writeCharacters("\n")
      xml.writeEndDocument()
      xml.close()
    finally out.close()
    file
