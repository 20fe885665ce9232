package fleetsim.profile

import java.util.random.RandomGenerator

/** What a template reads while it renders: one device, one call. Implemented by the device side. */
trait Scope:
  def random: RandomGenerator
  /** The device's state for walk slot `slot` (0.0 until first written). */
  def walk(slot: Int): Double
  def setWalk(slot: Int, value: Double): Unit

/** A variable a template may name: the caller supplies these, by name, at compile time. */
trait Variable[-S <: Scope]:
  /** Appends the variable's current value for this scope to `out`. */
  def appendTo(scope: S, out: java.lang.StringBuilder): Unit

/** Hands out walk slots: one counter per profile, shared by all its templates. */
final class Slots:
  private var used = 0

  def next(): Int =
    used += 1
    used - 1

  def count: Int = used

/** How each interpolated value is written into its template's text; literal text is never escaped. */
enum Escape:
  /** As it is: paths, headers, raw text. */
  case None
  /** The inside of a JSON string: `"{{ name }}"` stays valid JSON whatever the name holds. */
  case Json
  /** A form-encoded field value (java.net.URLEncoder, UTF-8). */
  case Url

  /** Escapes what `out` holds from `from` on, in place. */
  private[profile] def escapeFrom(out: java.lang.StringBuilder, from: Int): Unit = this match
    case None => ()
    case Json => Encoding.escapeJson(out, from)
    case Url => Encoding.escapeUrl(out, from)

/** A request's text with `{{ expression }}` interpolations, compiled once per profile and rendered per
  * device per call. Rendering is a loop over literal text and values, each value appended (and
  * escaped) in place in the caller's builder: no String per value, nothing parsed or looked up per call.
  *
  * @param literals the text around the values: one more than there are values
  * @param values interpolations left after constant ones were folded into the literal text
  */
final class Template[-S <: Scope] private[profile] (
    literals: Array[String], values: Array[Variable[S]], escape: Escape, val variables: Set[String]):

  /** Appends the rendered text to `out`. */
  def render(scope: S, out: java.lang.StringBuilder): Unit =
    out.append(literals(0))
    var i = 0
    while i < values.length do
      val from = out.length
      values(i).appendTo(scope, out)
      escape.escapeFrom(out, from)
      i += 1
      out.append(literals(i))

  /** The rendered text as a String (for values that are not bytes on the wire). */
  def text(scope: S): String =
    val scratch = Scratch.get()
    val out = scratch.borrowBuilder()
    try
      render(scope, out)
      out.toString
    finally scratch.giveBack(out)

  /** The rendered text as UTF-8 bytes of exact size, using a per-thread StringBuilder. */
  def bytes(scope: S): Array[Byte] =
    val scratch = Scratch.get()
    val out = scratch.borrowBuilder()
    try
      render(scope, out)
      Encoding.utf8(out)
    finally scratch.giveBack(out)

  /** Literal text only: nothing to render per call (the caller may render it once). */
  def isConstant: Boolean = values.isEmpty

object Template:
  /** Compiles `text`, resolving its variable names through `variables` and giving each `walk` call a
    * slot from `slots`. An error is one line saying what is wrong and where in `text`; the caller
    * adds the file and line.
    *
    * @param known the names `variables` resolves, listed and searched for a suggestion when a name is unknown
    * @param origin characters at the start of `text` the user did not write, left out of an error's column
    */
  def compile[S <: Scope](text: String, variables: String => Option[Variable[S]], escape: Escape, slots: Slots,
      known: Iterable[String] = Nil, origin: Int = 0): Either[String, Template[S]] =
    try Right(TemplateCompiler(text, variables, known, escape, slots, origin = origin).compile())
    catch case e: TemplateError => Left(e.getMessage)

  /** The names of the functions, for help text and suggestions. */
  val functions: Seq[String] = TemplateFunction.values.toSeq.map(_.name)
