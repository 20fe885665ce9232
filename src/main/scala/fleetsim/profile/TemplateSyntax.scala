package fleetsim.profile

import fleetsim.Comparison

/** A mistake in a template, found while compiling it: one line for the user. */
private[profile] final class TemplateError(message: String) extends Exception(message, null, false, false)

/** An interpolation's expression as written; `from` until `to` is where it stands in the template. */
private[profile] sealed trait Expr:
  def from: Int
  def to: Int

private[profile] object Expr:
  final case class Str(value: String, from: Int, to: Int) extends Expr
  /** A number literal, kept as written: it renders as its text. */
  final case class Num(text: String, from: Int, to: Int) extends Expr:
    def isWhole: Boolean = !text.contains('.')
  final case class Ref(name: String, from: Int, to: Int) extends Expr
  final case class Call(name: String, args: Vector[Expr], from: Int, to: Int) extends Expr
  final case class Concat(parts: Vector[Expr], from: Int, to: Int) extends Expr
  final case class Compare(comparison: Comparison, left: Expr, right: Expr, from: Int, to: Int) extends Expr
  final case class And(parts: Vector[Expr], from: Int, to: Int) extends Expr
  final case class Or(parts: Vector[Expr], from: Int, to: Int) extends Expr
  final case class Not(operand: Expr, from: Int, to: Int) extends Expr

/** A template as written: literal text around each interpolation (one more literal than expressions).
  *
  * @param places where each interpolation stands in the text, from its `{{` to just after its `}}`
  */
private[profile] final case class Parsed(literals: Vector[String], expressions: Vector[Expr], places: Vector[(Int, Int)])

/** Reads a template's text:
  * {{{
  * template    := (text | "{{" expression "}}")*
  * expression  := conjunction ("||" conjunction)*
  * conjunction := comparison ("&&" comparison)*
  * comparison  := sum (("==" | "!=" | "<" | "<=" | ">" | ">=") sum)?
  * sum         := unary ("+" unary)*
  * unary       := "!" unary | term
  * term        := 'string' | number | name | name "(" (expression ("," expression)*)? ")" | "(" expression ")"
  * }}}
  * Whitespace may stand between any two tokens. A literal `{{` is written `{{ '{{' }}`.
  */
/** @param origin characters at the start of `text` that the user did not write (a check's `{{`), left out of its columns */
private[profile] final class TemplateSyntax(text: String, origin: Int = 0):
  private var pos = 0
  private var open = 0 // where the interpolation being read starts, for "unclosed {{"

  def parse(): Parsed =
    val literals = Vector.newBuilder[String]
    val expressions = Vector.newBuilder[Expr]
    val places = Vector.newBuilder[(Int, Int)]
    var literalStart = 0
    open = text.indexOf("{{")
    while open >= 0 do
      literals += text.substring(literalStart, open)
      pos = open + 2
      skipSpace()
      if text.startsWith("}}", pos) then fail(s"empty {{ }} at ${where(open)}")
      expressions += expression()
      skipSpace()
      if !text.startsWith("}}", pos) then fail(s"expected an operator or }} at ${where(pos)}, got '${peek()}'")
      pos += 2
      places += open -> pos
      literalStart = pos
      open = text.indexOf("{{", pos)
    literals += text.substring(literalStart)
    Parsed(literals.result(), expressions.result(), places.result())

  /** "column 12", or "line 3, column 12" in a template of several lines. */
  def where(offset: Int): String =
    val lineStart = text.lastIndexOf('\n', offset - 1) + 1
    val line = text.substring(0, lineStart).count(_ == '\n') + 1
    val column = offset - lineStart + 1 - (if lineStart == 0 then origin else 0)
    if line == 1 then s"column $column" else s"line $line, column $column"

  /** The expression's text as written, for messages. */
  def source(expr: Expr): String = text.substring(expr.from, expr.to)

  private def expression(): Expr = joined("||", conjunction, Expr.Or.apply)

  private def conjunction(): Expr = joined("&&", comparison, Expr.And.apply)

  private def comparison(): Expr =
    val left = sum()
    comparator() match
      case None => left
      case Some(comparison) =>
        val right = sum()
        skipSpace()
        val at = pos
        if comparator().isDefined then fail(s"comparisons do not chain, at ${where(at)} (write a < b && b < c)")
        Expr.Compare(comparison, left, right, left.from, right.to)

  private def sum(): Expr = joined("+", unary, Expr.Concat.apply)

  private def unary(): Expr =
    skipSpace()
    if !text.startsWith("!", pos) || text.startsWith("!=", pos) then term()
    else
      val start = pos
      pos += 1
      val operand = unary()
      Expr.Not(operand, start, operand.to)

  /** One or more operands with `operator` between them: the operand alone if there is one. */
  private def joined(operator: String, operand: () => Expr, make: (Vector[Expr], Int, Int) => Expr): Expr =
    val first = operand()
    if !skip(operator) then first
    else
      val parts = Vector.newBuilder[Expr] += first
      while
        parts += operand()
        skip(operator)
      do ()
      val all = parts.result()
      make(all, first.from, all.last.to)

  /** The comparison operator next, read past, if there is one. A lone =, & or | is a mistake for its double. */
  private def comparator(): Option[Comparison] =
    skipSpace()
    val found = Comparison.values.filter(c => text.startsWith(c.symbol, pos)).maxByOption(_.symbol.length)
    found.foreach(c => pos += c.symbol.length)
    if found.isEmpty then
      for (lone, meant) <- Seq("=" -> "== to compare", "&" -> "&& for and", "|" -> "|| for or") do
        if text.startsWith(lone, pos) && !text.startsWith(lone * 2, pos) then
          fail(s"unknown operator $lone at ${where(pos)} (use $meant)")
    found

  /** Reads past `operator` if it is next. */
  private def skip(operator: String): Boolean =
    skipSpace()
    val found = text.startsWith(operator, pos)
    if found then pos += operator.length
    found

  private def term(): Expr =
    skipSpace()
    val start = pos
    peek() match
      case '\'' => string()
      case c if c == '-' || c.isDigit => number()
      case '(' =>
        pos += 1
        val inner = expression()
        expect(')')
        inner
      case c if isNameStart(c) =>
        while pos < text.length && isNamePart(text.charAt(pos)) do pos += 1
        val name = text.substring(start, pos)
        skipSpace()
        if peek() == '(' then
          val args = arguments()
          Expr.Call(name, args, start, pos)
        else
          pos = start + name.length
          Expr.Ref(name, start, pos)
      case c => fail(s"expected a value at ${where(pos)}, got '$c'")

  private def arguments(): Vector[Expr] =
    pos += 1 // (
    skipSpace()
    if peek() == ')' then
      pos += 1
      Vector.empty
    else
      val args = Vector.newBuilder[Expr] += expression()
      skipSpace()
      while peek() == ',' do
        pos += 1
        args += expression()
        skipSpace()
      expect(')')
      args.result()

  private def string(): Expr =
    val start = pos
    val value = StringBuilder()
    pos += 1
    while
      if pos >= text.length then fail(s"unterminated string at ${where(start)}")
      text.charAt(pos) match
        case '\'' => false
        case '\\' =>
          val escaped = if pos + 1 < text.length then text.charAt(pos + 1) else ' '
          if escaped != '\'' && escaped != '\\' then fail(s"unknown escape \\$escaped at ${where(pos)} (a string knows only \\' and \\\\)")
          value += escaped
          pos += 2
          true
        case c =>
          value += c
          pos += 1
          true
    do ()
    pos += 1
    Expr.Str(value.toString, start, pos)

  private def number(): Expr =
    val start = pos
    pos += 1
    while pos < text.length && (isNamePart(text.charAt(pos)) || text.charAt(pos) == '.') do pos += 1
    val literal = text.substring(start, pos)
    if !literal.matches("-?[0-9]+(\\.[0-9]+)?") then fail(s"bad number '$literal' at ${where(start)}")
    if !literal.contains('.') && literal.toLongOption.isEmpty then fail(s"number $literal at ${where(start)} is too large")
    Expr.Num(literal, start, pos)

  private def expect(c: Char): Unit =
    skipSpace()
    if peek() != c then fail(s"expected $c at ${where(pos)}, got '${peek()}'")
    pos += 1

  /** The next character; the end of the text means the interpolation was never closed. */
  private def peek(): Char =
    if pos >= text.length then fail(s"unclosed {{ at ${where(open)}")
    text.charAt(pos)

  private def skipSpace(): Unit =
    while pos < text.length && text.charAt(pos).isWhitespace do pos += 1

  private def isNameStart(c: Char) = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'
  private def isNamePart(c: Char) = isNameStart(c) || (c >= '0' && c <= '9')

  private def fail(message: String): Nothing = throw TemplateError(message)
