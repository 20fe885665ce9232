package fleetsim.report

import com.github.plokhotnyuk.jsoniter_scala.core.writeToString
import fleetsim.metrics.Sample

import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.{Files, Path}

/** report.html: one self-contained page — chart library, charts, data and all — built from what a
  * run leaves in its folder (config.json, summary.json, timeseries.jsonl), so it opens offline and
  * can be rebuilt after a crash (`fleetsim report DIR`).
  */
object Report:
  val FileName = "report.html"
  val ConfigFile = "config.json"

  /** Writes report.html into `dir` from the run's files there; summary.json may be missing. */
  def write(dir: Path): Path =
    def json(name: String) = Some(dir.resolve(name)).filter(Files.isRegularFile(_)).map(Files.readString(_, UTF_8).trim)
    val samples = Timeseries.read(dir).map(writeToString[Sample](_)).mkString("[", ",\n", "]")
    val data = s"""{"summary":${json(Summary.FileName).getOrElse("null")},"config":${json(ConfigFile).getOrElse("null")},"samples":$samples}"""
    val page = Assets.text("fleetsim/report/report.html")
      .replace("/*STYLE*/", Assets.text(Assets.Style))
      .replace("/*CHART_JS*/", scriptSafe(Assets.text(Assets.ChartJs)))
      .replace("/*CHARTS_JS*/", scriptSafe(Assets.text(Assets.Charts)))
      .replace("/*DATA*/", scriptSafe(data))
    val file = dir.resolve(FileName)
    Files.writeString(file, page, UTF_8)
    file

  /** Text that can sit inside a script element. */
  private def scriptSafe(script: String): String = script.replace("</", "<\\/")

/** The web assets in the jar, for the dashboard and the report alike. */
object Assets:
  val ChartJs = "META-INF/resources/webjars/chart.js/4.4.7/dist/chart.umd.js"
  val Charts = "fleetsim/web/charts.js"
  val Style = "fleetsim/web/style.css"

  def text(path: String): String =
    val in = Option(getClass.getClassLoader.getResourceAsStream(path)).getOrElse(throw IllegalStateException(s"$path is missing from the jar"))
    try String(in.readAllBytes(), UTF_8) finally in.close()
