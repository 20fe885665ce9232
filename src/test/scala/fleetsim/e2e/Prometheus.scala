package fleetsim.e2e

import java.net.URI
import java.net.http.{HttpClient, HttpRequest, HttpResponse}

/** A scrape of a Prometheus /metrics page, parsed strictly: a line that is not a comment, a blank
  * or `name{labels} value` fails the parse.
  */
final case class Scrape(series: Map[String, Double]):
  /** The value of `name{k="v",...}`, labels in any order. */
  def apply(name: String, labels: (String, String)*): Double =
    val key = Scrape.key(name, labels.toMap)
    series.getOrElse(key, throw java.util.NoSuchElementException(s"no series $key"))
  def names(prefix: String): Set[String] = series.keySet.filter(_.startsWith(prefix))

object Scrape:
  private val Sample = """([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+-?\d+)?""".r
  private val Label = """([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"""".r
  private val Comment = """# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* .*""".r

  def key(name: String, labels: Map[String, String]): String =
    if labels.isEmpty then name else labels.toSeq.sorted.map((k, v) => s"""$k="$v"""").mkString(s"$name{", ",", "}")

  def parse(text: String): Scrape =
    val series = text.linesIterator.filterNot(l => l.isEmpty || l == "# EOF").flatMap {
      case Comment(_) => None
      case Sample(name, labels, value) =>
        val pairs = Option(labels).filter(_.nonEmpty).fold(Map.empty[String, String])(l => Label.findAllMatchIn(l).map(m => m.group(1) -> m.group(2)).toMap)
        Some(key(name, pairs) -> value.toDouble)
      case other => throw IllegalArgumentException(s"not Prometheus text: '$other'")
    }
    Scrape(series.toMap)

  def from(url: String): Scrape =
    val response = HttpClient.newHttpClient().send(HttpRequest.newBuilder(URI.create(url)).build(), HttpResponse.BodyHandlers.ofString())
    assert(response.statusCode == 200, s"$url answered ${response.statusCode}")
    parse(response.body)
