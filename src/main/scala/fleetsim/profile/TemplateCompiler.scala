package fleetsim.profile

import fleetsim.Suggest

import scala.util.Try

/** Turns a template's text into a [[Template]]: names resolved, functions and their literal arguments
  * checked, walk slots handed out, and everything that does not vary per call worked out now.
  *
  * @param everyBranch each `if` whose condition varies becomes a `pick` of its two branches, so that
  *                    renderings that try every pick's choices ([[JsonBody]]) try both branches
  */
private[profile] final class TemplateCompiler[S <: Scope](text: String, lookup: String => Option[Variable[S]],
    known: Iterable[String], escape: Escape, slots: Slots, everyBranch: Boolean = false, origin: Int = 0):
  import TemplateFunction.*

  private val syntax = TemplateSyntax(text, origin)
  private val names = Set.newBuilder[String]

  def compile(): Template[S] =
    val parsed = syntax.parse()
    val literals = Array.newBuilder[String]
    val values = Array.newBuilder[Variable[S]]
    val literal = java.lang.StringBuilder(parsed.literals.head)
    for (expression, after) <- parsed.expressions.zip(parsed.literals.tail) do
      build(expression) match
        case constant: Constant =>
          // Escaped once, here, and from now on part of the literal text.
          val from = literal.length
          literal.append(constant.text)
          escape.escapeFrom(literal, from)
        case value =>
          literals += literal.toString
          literal.setLength(0)
          values += value
      literal.append(after)
    literals += literal.toString
    Template(literals.result(), values.result(), escape, names.result())

  private def build(expression: Expr): Variable[S] = expression match
    case Expr.Str(value, _, _) => Constant(value)
    case Expr.Num(literal, _, _) => Constant(literal)
    case Expr.Ref(name, from, _) => variable(name, from)
    case Expr.Concat(parts, _, _) =>
      val built = parts.map(build)
      folded(Concatenation(built.toArray), built)
    case Expr.Compare(comparison, left, right, _, _) =>
      val sides = Vector(build(left), build(right))
      folded(Compared(sides(0), sides(1), comparison), sides)
    case Expr.And(parts, _, _) =>
      val built = parts.map(build)
      folded(Logic(built.toArray, and = true), built)
    case Expr.Or(parts, _, _) =>
      val built = parts.map(build)
      folded(Logic(built.toArray, and = false), built)
    case Expr.Not(operand, _, _) =>
      val built = build(operand)
      folded(Negation(built), Seq(built))
    case call: Expr.Call =>
      val function = TemplateFunction.byName.getOrElse(call.name, unknownFunction(call))
      val count = call.args.size
      if count < function.minArgs || count > function.maxArgs then
        fail(s"${function.name} at ${where(call.from)} takes ${function.arity} (${function.params}), got $count")
      val value = compileCall(function, call)
      if function.deterministic && call.args.forall(isConstant) then Constant(rendered(value)) else value

  /** `value` worked out now if what it reads, `parts`, are all constants. */
  private def folded(value: Variable[S], parts: Seq[Variable[S]]): Variable[S] =
    if parts.forall(_.isInstanceOf[Constant]) then Constant(rendered(value)) else value

  /** The text of a value built from constants by deterministic functions: it never reads the scope. */
  private def rendered(value: Variable[S]): String =
    val out = java.lang.StringBuilder()
    value.appendTo(null.asInstanceOf[S], out)
    out.toString

  private def isConstant(expression: Expr): Boolean = expression match
    case _: Expr.Str | _: Expr.Num => true
    case _: Expr.Ref => false
    case Expr.Concat(parts, _, _) => parts.forall(isConstant)
    case Expr.Compare(_, left, right, _, _) => isConstant(left) && isConstant(right)
    case Expr.And(parts, _, _) => parts.forall(isConstant)
    case Expr.Or(parts, _, _) => parts.forall(isConstant)
    case Expr.Not(operand, _, _) => isConstant(operand)
    case Expr.Call(name, args, _, _) => TemplateFunction.byName(name).deterministic && args.forall(isConstant)

  private def variable(name: String, from: Int): Variable[S] =
    lookup(name) match
      case Some(value) =>
        names += name
        value
      case None =>
        TemplateFunction.byName.get(name).foreach { f =>
          fail(s"${f.name} at ${where(from)} is a function: call it as ${f.name}(${f.params})")
        }
        val listed = if known.isEmpty then Nil else List(s"known: ${known.toSeq.sorted.mkString(", ")}")
        val hints = listed ++ Suggest.closest(name, known).map(s => s"did you mean $s?")
        fail(s"unknown variable '$name' at ${where(from)}${if hints.isEmpty then "" else hints.mkString(" (", "; ", ")")}")

  private def unknownFunction(call: Expr.Call): Nothing =
    val hint = Suggest.closest(call.name, Template.functions) match
      case Some(name) => s"did you mean $name?"
      case None => s"functions: ${Template.functions.mkString(", ")}"
    fail(s"unknown function '${call.name}' at ${where(call.from)} ($hint)")

  private def compileCall(function: TemplateFunction, call: Expr.Call): Variable[S] =
    def arg(i: Int) = build(call.args(i))
    function match
      case Upper => CaseChange(arg(0), upper = true)
      case Lower => CaseChange(arg(0), upper = false)
      case UrlEncode => UrlEncoded(arg(0))
      case Base64 => Base64Encoded(arg(0))
      case Md5 => Digest(arg(0), Hash.Md5)
      case Sha1 => Digest(arg(0), Hash.Sha1)
      case Sha256 => Digest(arg(0), Hash.Sha256)
      case HmacSha256 | HmacSha256Base64 =>
        val base64 = function == HmacSha256Base64
        arg(0) match
          case key: Constant => HmacWithKey(key.text.getBytes(java.nio.charset.StandardCharsets.UTF_8), arg(1), base64)
          case key => Hmac(key, arg(1), base64)
      case RandomInt =>
        val min = whole(call, 0, "min")
        val max = whole(call, 1, "max")
        if min > max then fail(s"randomInt at ${where(call.from)}: min $min is above max $max")
        UniformWhole(min, max)
      case RandomFloat =>
        val min = number(call, 0, "min")
        val max = number(call, 1, "max")
        val decimals = if call.args.size == 3 then whole(call, 2, "decimals") else 2L
        if decimals < 0 || decimals > 9 then fail(s"randomFloat at ${where(call.args(2).from)}: decimals must be from 0 to 9, got $decimals")
        if min >= max then fail(s"randomFloat at ${where(call.from)}: min $min must be below max $max")
        val unit = BigDecimal(10).pow(decimals.toInt)
        def units(bound: BigDecimal) = Try((bound * unit).setScale(0, BigDecimal.RoundingMode.CEILING).toLongExact)
          .getOrElse(fail(s"randomFloat at ${where(call.from)}: $bound is too large"))
        val lowest = units(min)
        val highest = units(max) - 1
        if lowest > highest then fail(s"randomFloat at ${where(call.from)}: no number of $decimals decimals is in [$min, $max)")
        UniformDecimal(lowest, highest, decimals.toInt)
      case Pick => Choice(call.args.map(build).toArray)
      case Walk =>
        val start = number(call, 0, "start")
        val min = number(call, 1, "min")
        val max = number(call, 2, "max")
        val step = number(call, 3, "step")
        if min > max then fail(s"walk at ${where(call.from)}: min $min is above max $max")
        if start < min || start > max then fail(s"walk at ${where(call.from)}: start $start is outside [$min, $max]")
        if step <= 0 then fail(s"walk at ${where(call.from)}: step must be above 0, got $step")
        val whole = call.args.forall { case n: Expr.Num => n.isWhole; case _ => false }
        RandomWalk(slots.next(), start.toDouble, min.toDouble, max.toDouble, step.toDouble, whole)
      case Pad =>
        val width = whole(call, 1, "width")
        if width < 1 || width > ZeroPadded.MaxWidth then
          fail(s"pad at ${where(call.args(1).from)}: width must be from 1 to ${ZeroPadded.MaxWidth}, got $width")
        ZeroPadded(arg(0), width.toInt)
      case If =>
        val condition = arg(0)
        val yes = arg(1)
        val no = arg(2)
        // A sample stands in for a variable as a constant: only a literal condition picks one branch then.
        if everyBranch && !isConstant(call.args(0)) then Choice(Array(yes, no))
        else condition match
          case known: Constant => if Truth.of(known.text, 0, known.text.length) then yes else no
          case _ => Conditional(condition, yes, no)

  /** A literal whole-number argument. */
  private def whole(call: Expr.Call, i: Int, what: String): Long = call.args(i) match
    case n: Expr.Num if n.isWhole => n.text.toLong
    case other => fail(s"${call.name} at ${where(other.from)}: $what must be a whole number, like 10 (got ${syntax.source(other)})")

  /** A literal number argument. */
  private def number(call: Expr.Call, i: Int, what: String): BigDecimal = call.args(i) match
    case n: Expr.Num => BigDecimal(n.text)
    case other => fail(s"${call.name} at ${where(other.from)}: $what must be a number, like 2.5 (got ${syntax.source(other)})")

  private def where(offset: Int) = syntax.where(offset)

  private def fail(message: String): Nothing = throw TemplateError(message)
