package fleetsim.report

import fleetsim.Comparison

import scala.concurrent.duration.FiniteDuration

/** A threshold the run must pass: a figure of its summary, a comparison and a bound in the figure's
  * unit (`latency.heartbeat.p99 < 200ms` has the bound 200 ms, `errors.rate < 1%` 1 %), as the
  * user wrote it in `text`. Judged at the end, on the summary ([[Verdict.judge]]); one that
  * `abortsFrom` a time into the run also every second from then, and the first second it fails on a
  * value the run stops.
  */
final case class Threshold(text: String, figure: Figure, comparison: Comparison, bound: Double,
    abortsFrom: Option[FiniteDuration] = None):
  def holds(value: Double): Boolean = comparison.holds(value.compare(bound))

object Threshold:
  /** A threshold as written, its figure not yet looked up: what the syntax alone says. */
  final case class Written(text: String, figure: String, comparison: Comparison, number: BigDecimal, unit: String)

  val Examples = "'latency.heartbeat.p99 < 200ms' or 'errors.rate < 1%'"

  // A figure's name holds no space nor comparison; '=' is read to be refused by name.
  private val Shape = """\s*([^\s<>=!]+)\s*(<=|>=|==|!=|<|>|=)\s*(.*?)\s*""".r
  private val Bound = """(\d+(?:\.\d+)?)\s*(ms|s|%)?""".r

  /** What `text` says, or what is wrong with its syntax, in words that say what to write. Whether its
    * figure exists is for [[Figures.threshold]] to say: that depends on the device profile.
    */
  def parse(text: String): Either[String, Written] = text match
    case Shape(figure, operator, bound) =>
      Comparison.values.find(_.symbol == operator) match
        case None => Left(s"'$text': $operator is not a comparison: use <, <=, >, >=, == or !=")
        case Some(comparison) =>
          bound match
            case Bound(number, unit) => Right(Written(text.trim, figure, comparison, BigDecimal(number), Option(unit).getOrElse("")))
            case _ => Left(s"'$text': '$bound' is not a bound: write a number with ms, s, % or no unit, like 200ms, 1s, 1% or 10")
    case _ => Left(s"'$text' is not a threshold: write a figure, a comparison and a bound, like $Examples")
