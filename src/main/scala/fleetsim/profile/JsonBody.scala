package fleetsim.profile

import com.github.plokhotnyuk.jsoniter_scala.core.{JsonReader, JsonReaderException, JsonValueCodec, JsonWriter, ReaderConfig, readFromArray}

import java.nio.charset.StandardCharsets.UTF_8
import java.util.SplittableRandom
import java.util.random.RandomGenerator
import scala.collection.mutable

/** Checks a JSON body's template at load, so that a body no device could send as JSON is refused
  * before any device starts. Each `{{...}}` renders with a sample of its type — a text as text, a
  * number as a number, each choice of a `pick` and each branch of an `if` in turn (whatever its
  * condition says of the samples) — and what comes out is read by a strict JSON parser (RFC 8259:
  * no single quotes, bare keys, trailing commas, NaN). A text must stand inside quotes, where it is
  * escaped; a number may stand bare.
  */
private[profile] object JsonBody:
  /** How a number stands in: any of them renders as a JSON number. */
  val Number = "1"
  /** How a text stands in: not JSON on its own, so it must stand inside quotes. */
  val Text = "sample"

  /** Combinations of `pick` choices tried at most, for a body of many picks. */
  private val MaxRounds = 64
  /** Deeper nesting is refused rather than read on the stack. */
  private val MaxDepth = 256

  /** How a value that is always one of `values` stands in (a pick's choices, a CSV column): the
    * first that is not JSON on its own, so that it may stand bare only if every one of them is
    * (numbers, true, false).
    */
  def sampleOf(values: Iterable[String]): String =
    values.find(v => parse(v).isDefined).orElse(values.headOption).getOrElse(Text)

  /** `text` rendered with `samples` for its variables: how a value built from others stands in. Of its
    * renderings with each pick's choice and each if's branch, the one [[sampleOf]] takes.
    */
  def sample(text: String, samples: Map[String, String], escape: Escape): String =
    compile(text, samples, escape).fold(Text) { template =>
      val scope = SampleScope()
      val renderings = mutable.ArrayBuffer.empty[String]
      while
        renderings += template.text(scope)
        renderings.size < MaxRounds && scope.choices.next()
      do ()
      sampleOf(renderings)
    }

  /** None if `text`, rendered with each variable as `samples` has it, is JSON whatever its picks
    * and ifs choose; else why not, where in `text`, and how to fix it: "(reason at column N): hint".
    * `text` has compiled already: a mistake in a template is that compile's to report.
    */
  def check(text: String, samples: Map[String, String], escape: Escape): Option[String] =
    val syntax = TemplateSyntax(text)
    val parsed = try Some(syntax.parse()) catch case _: TemplateError => None
    // Each interpolation on its own, so that what is wrong can be pinned on one as written.
    val values = parsed.toSeq.flatMap(_.places.map((from, to) => compile(text.substring(from, to), samples, escape)))
    if parsed.isEmpty || values.exists(_.isEmpty) then None
    else
      val Parsed(literals, _, places) = parsed.get
      val templates = values.map(_.get)
      val scope = SampleScope()
      var problem = Option.empty[String]
      var rounds = 0
      var more = true
      while problem.isEmpty && more && rounds < MaxRounds do
        val out = java.lang.StringBuilder(literals.head)
        val spans = templates.zip(literals.tail).map { (template, after) =>
          val from = out.length
          template.render(scope, out)
          val span = from -> out.length
          out.append(after)
          span
        }
        val rendered = out.toString
        problem = parse(rendered).map { (reason, at) =>
          val blamed = spans.indexWhere((from, to) => from <= at && at < to || from == at && to == at)
          val column = syntax.where(if blamed >= 0 then places(blamed)._1 else inTemplate(at, spans, places))
          val hint =
            if blamed >= 0 then s"quote a text placeholder: \"${text.substring(places(blamed)._1, places(blamed)._2)}\""
            else hintFor(reason, rendered, at)
          s"($reason at $column): $hint"
        }
        more = scope.choices.next()
        rounds += 1
      problem

  /** `text` with `samples` for its variables, and each `if` a pick of its branches. */
  private def compile(text: String, samples: Map[String, String], escape: Escape): Option[Template[Scope]] =
    val lookup = (name: String) => Some(Constant(samples.getOrElse(name, Text)))
    try Some(TemplateCompiler[Scope](text, lookup, Nil, escape, Slots(), everyBranch = true).compile())
    catch case _: TemplateError => None

  /** Where in the template the rendered text's character `at` comes from, it being literal text. */
  private def inTemplate(at: Int, spans: Seq[(Int, Int)], places: Seq[(Int, Int)]): Int =
    val before = spans.lastIndexWhere(_._2 <= at)
    if before < 0 then at else places(before)._2 + (at - spans(before)._2)

  /** How to fix literal text that is not JSON, from what stands where the parser stopped. */
  private def hintFor(reason: String, rendered: String, at: Int): String =
    val rest = rendered.substring(at.min(rendered.length))
    val previous = rendered.substring(0, at.min(rendered.length)).reverse.find(!_.isWhitespace)
    if rest.startsWith("'") then "write JSON strings and keys in double quotes, not single"
    else if rest.startsWith("NaN") || rest.startsWith("Infinity") || rest.startsWith("-Infinity") then
      "JSON has no NaN or Infinity: write a number, or null"
    else if previous.contains(',') && (rest.startsWith("]") || rest.startsWith("}")) then s"remove the comma before ${rest.head}"
    else if reason == "expected '\"'" && rest.headOption.exists(c => c.isLetter || c == '_') then
      s"write each key in double quotes: \"${rest.takeWhile(c => c.isLetterOrDigit || c == '_' || c == '-')}\""
    else if reason.startsWith("unescaped control character") then "write a line break or tab inside a string as \\n or \\t"
    else if reason == "expected end of input" then "a body is one JSON value: remove what follows it"
    else "write strict JSON (RFC 8259): keys and strings in double quotes, no trailing commas, no comments"

  private val Config = ReaderConfig.withAppendHexDumpToParseException(false)
  private val Problem = "(.*), offset: 0x([0-9a-fA-F]+)".r

  /** None if `text` is one JSON value; else the parser's reason and the character it stopped at. */
  private def parse(text: String): Option[(String, Int)] =
    val bytes = text.getBytes(UTF_8)
    try
      readFromArray(bytes, Config)(using StrictJson)
      None
    catch
      case e: JsonReaderException =>
        e.getMessage match
          case Problem(reason, offset) =>
            val byte = Integer.parseInt(offset, 16).min(bytes.length)
            Some(reason -> String(bytes, 0, byte, UTF_8).length)
          case other => Some(other.linesIterator.nextOption().getOrElse("not JSON") -> text.length)

  /** Reads one JSON value strictly and keeps nothing (the reader's own `skip` does not look inside
    * objects and arrays: it would take `{'a':1}` and `[1,2,]`).
    */
  private object StrictJson extends JsonValueCodec[Unit]:
    def nullValue: Unit = ()
    def encodeValue(x: Unit, out: JsonWriter): Unit = throw UnsupportedOperationException("a JSON check only reads")
    def decodeValue(in: JsonReader, default: Unit): Unit = value(in, 0)

    private def value(in: JsonReader, depth: Int): Unit =
      if depth > MaxDepth then in.decodeError(s"nested deeper than $MaxDepth")
      in.nextToken().toChar match
        case '"' =>
          in.rollbackToken()
          in.readString(null)
        case 't' | 'f' =>
          in.rollbackToken()
          in.readBoolean()
        case 'n' => in.readNullOrError((), "expected value")
        case '{' =>
          if !in.isNextToken('}') then
            in.rollbackToken()
            var more = true
            while more do
              in.readKeyAsCharBuf()
              value(in, depth + 1)
              more = in.isNextToken(',')
              if !more && !in.isCurrentToken('}') then in.objectEndOrCommaError()
        case '[' =>
          if !in.isNextToken(']') then
            in.rollbackToken()
            var more = true
            while more do
              value(in, depth + 1)
              more = in.isNextToken(',')
              if !more && !in.isCurrentToken(']') then in.arrayEndOrCommaError()
        case c if c == '-' || (c >= '0' && c <= '9') =>
          in.rollbackToken()
          in.readBigDecimal(null) // the strict number grammar: no leading zeros, no "1.", no "+1"
        case _ => in.decodeError("expected value")

  /** What the sample renderings read: no walk moves, and picks choose by turns. */
  private final class SampleScope extends Scope:
    val choices = Choices()
    def random: RandomGenerator = choices
    def walk(slot: Int): Double = 0
    def setWalk(slot: Int, value: Double): Unit = ()

  /** A random source under which rendering again and again tries every combination of the picks'
    * choices, one per rendering (`pick` is the one function that draws with nextInt(bound)); other
    * draws are seeded, any value in their range being as good as another.
    */
  private final class Choices extends RandomGenerator:
    private val draws = SplittableRandom(1)
    private val made = mutable.ArrayBuffer.empty[Int] // the choice of each pick this rendering, in order
    private val of = mutable.ArrayBuffer.empty[Int] // how many choices each had
    private var at = 0

    def nextLong(): Long = draws.nextLong()

    override def nextInt(bound: Int): Int =
      if at == made.size then
        made += 0
        of += bound
      at += 1
      made(at - 1).min(bound - 1)

    /** Moves on to the next combination; false once every one was rendered. */
    def next(): Boolean =
      var last = at - 1
      at = 0
      while last >= 0 && made(last) >= of(last) - 1 do last -= 1
      made.dropRightInPlace(made.size - last - 1)
      of.dropRightInPlace(of.size - last - 1)
      if last < 0 then false
      else
        made(last) += 1
        true
