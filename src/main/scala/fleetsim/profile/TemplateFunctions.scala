package fleetsim.profile

import fleetsim.Comparison

import java.util.Locale
import java.util.random.RandomGenerator
import javax.crypto.{Mac, SecretKey}

/** The functions a template may call, with their parameters as a user sees them.
  *
  * @param deterministic the same arguments always give the same text, so a call on literals is
  *                      worked out once, at compile time
  */
private[profile] enum TemplateFunction(val name: String, val params: String, val minArgs: Int, val maxArgs: Int,
    val deterministic: Boolean = true):
  case Upper extends TemplateFunction("upper", "x", 1, 1)
  case Lower extends TemplateFunction("lower", "x", 1, 1)
  case UrlEncode extends TemplateFunction("urlencode", "x", 1, 1)
  case Base64 extends TemplateFunction("base64", "x", 1, 1)
  case Md5 extends TemplateFunction("md5", "x", 1, 1)
  case Sha1 extends TemplateFunction("sha1", "x", 1, 1)
  case Sha256 extends TemplateFunction("sha256", "x", 1, 1)
  case HmacSha256 extends TemplateFunction("hmacSha256", "key, x", 2, 2)
  case HmacSha256Base64 extends TemplateFunction("hmacSha256Base64", "key, x", 2, 2)
  case RandomInt extends TemplateFunction("randomInt", "min, max", 2, 2, deterministic = false)
  case RandomFloat extends TemplateFunction("randomFloat", "min, max[, decimals]", 2, 3, deterministic = false)
  case Pick extends TemplateFunction("pick", "a, b, ...", 1, Int.MaxValue, deterministic = false)
  case Walk extends TemplateFunction("walk", "start, min, max, step", 4, 4, deterministic = false)
  case Pad extends TemplateFunction("pad", "x, width", 2, 2)
  case If extends TemplateFunction("if", "condition, then, else", 3, 3)

  /** "1 argument", "2 or 3 arguments", "at least 1 argument". */
  def arity: String =
    val count =
      if minArgs == maxArgs then s"$minArgs"
      else if maxArgs == Int.MaxValue then s"at least $minArgs"
      else s"$minArgs or $maxArgs"
    val last = if maxArgs == Int.MaxValue then minArgs else maxArgs
    if last == 1 then s"$count argument" else s"$count arguments"

private[profile] object TemplateFunction:
  val byName: Map[String, TemplateFunction] = values.map(f => f.name -> f).toMap

private[profile] enum Hash(val algorithm: String):
  case Md5 extends Hash("MD5")
  case Sha1 extends Hash("SHA-1")
  case Sha256 extends Hash("SHA-256")

// The compiled forms of expressions. A function renders its arguments into `out` first and then
// rewrites that stretch in place: a call needs no buffer of its own, and none is in use while an
// argument (perhaps a caller's variable) renders.

/** Text known at compile time: a literal, or a value worked out from literals. */
private[profile] final class Constant(val text: String) extends Variable[Scope]:
  def appendTo(scope: Scope, out: java.lang.StringBuilder): Unit = out.append(text)

private[profile] final class Concatenation[S <: Scope](parts: Array[Variable[S]]) extends Variable[S]:
  def appendTo(scope: S, out: java.lang.StringBuilder): Unit =
    var i = 0
    while i < parts.length do
      parts(i).appendTo(scope, out)
      i += 1

private[profile] final class CaseChange[S <: Scope](arg: Variable[S], upper: Boolean) extends Variable[S]:
  def appendTo(scope: S, out: java.lang.StringBuilder): Unit =
    val from = out.length
    arg.appendTo(scope, out)
    val end = out.length
    var i = from
    while i < end && out.charAt(i) < 0x80 do
      val c = out.charAt(i)
      if upper && c >= 'a' && c <= 'z' then out.setCharAt(i, (c - 32).toChar)
      else if !upper && c >= 'A' && c <= 'Z' then out.setCharAt(i, (c + 32).toChar)
      i += 1
    if i < end then
      // Beyond ASCII the JDK's mapping, on the whole value: it may change the length (ß, SS) and
      // depend on neighbours (a final sigma).
      val value = out.substring(from)
      out.setLength(from)
      out.append(if upper then value.toUpperCase(Locale.ROOT) else value.toLowerCase(Locale.ROOT))

private[profile] final class UrlEncoded[S <: Scope](arg: Variable[S]) extends Variable[S]:
  def appendTo(scope: S, out: java.lang.StringBuilder): Unit =
    val from = out.length
    arg.appendTo(scope, out)
    Encoding.escapeUrl(out, from)

private[profile] final class Base64Encoded[S <: Scope](arg: Variable[S]) extends Variable[S]:
  def appendTo(scope: S, out: java.lang.StringBuilder): Unit =
    val from = out.length
    arg.appendTo(scope, out)
    val scratch = Scratch.get()
    val length = Encoding.utf8(out, from, out.length, scratch)
    out.setLength(from)
    Encoding.appendBase64(out, scratch.bytes, length)

/** Lowercase hex of the digest of the argument's UTF-8. */
private[profile] final class Digest[S <: Scope](arg: Variable[S], hash: Hash) extends Variable[S]:
  def appendTo(scope: S, out: java.lang.StringBuilder): Unit =
    val from = out.length
    arg.appendTo(scope, out)
    val scratch = Scratch.get()
    val digester = scratch.digester(hash)
    digester.update(scratch.bytes, 0, Encoding.utf8(out, from, out.length, scratch))
    val length = digester.digest(scratch.digest, 0, scratch.digest.length)
    out.setLength(from)
    Encoding.appendHex(out, scratch.digest, length)

/** HMAC-SHA256 with a key rendered per call (a device's own secret, say). */
private[profile] final class Hmac[S <: Scope](key: Variable[S], data: Variable[S], base64: Boolean) extends Variable[S]:
  def appendTo(scope: S, out: java.lang.StringBuilder): Unit =
    val from = out.length
    key.appendTo(scope, out)
    val dataFrom = out.length
    data.appendTo(scope, out)
    val scratch = Scratch.get()
    val keyLength = Encoding.utf8(out, from, dataFrom, scratch)
    scratch.hmac.init(HmacKey(java.util.Arrays.copyOf(scratch.bytes, keyLength)))
    Hmac.append(scratch.hmac, out, dataFrom, from, base64, scratch)

/** HMAC-SHA256 with a key known at compile time: each thread keeps a MAC already holding it. */
private[profile] final class HmacWithKey[S <: Scope](key: Array[Byte], data: Variable[S], base64: Boolean) extends Variable[S]:
  private val macs = ThreadLocal.withInitial { () =>
    val mac = Mac.getInstance("HmacSHA256")
    mac.init(HmacKey(key))
    mac
  }

  def appendTo(scope: S, out: java.lang.StringBuilder): Unit =
    val from = out.length
    data.appendTo(scope, out)
    Hmac.append(macs.get(), out, from, from, base64, Scratch.get())

private[profile] object Hmac:
  /** Replaces out[replaceFrom, end) with the MAC of out[dataFrom, end), in hex or base64. */
  def append(mac: Mac, out: java.lang.StringBuilder, dataFrom: Int, replaceFrom: Int, base64: Boolean, scratch: Scratch): Unit =
    mac.update(scratch.bytes, 0, Encoding.utf8(out, dataFrom, out.length, scratch))
    val length = mac.getMacLength
    mac.doFinal(scratch.digest, 0)
    out.setLength(replaceFrom)
    if base64 then Encoding.appendBase64(out, scratch.digest, length) else Encoding.appendHex(out, scratch.digest, length)

/** A raw HMAC key. Unlike SecretKeySpec it may be empty, which HMAC allows: a profile's empty secret
  * gives a wrong signature, not an exception on every call.
  */
private final class HmacKey(bytes: Array[Byte]) extends SecretKey:
  def getAlgorithm: String = "HmacSHA256"
  def getFormat: String = "RAW"
  // A copy: the JDK zeroes the array it is given once the MAC has taken the key.
  def getEncoded: Array[Byte] = bytes.clone()

/** A uniform whole number in [min, max]. */
private def uniform(random: RandomGenerator, min: Long, max: Long): Long =
  if max < Long.MaxValue then random.nextLong(min, max + 1) else random.nextLong(min - 1, max) + 1

private[profile] final class UniformWhole(min: Long, max: Long) extends Variable[Scope]:
  def appendTo(scope: Scope, out: java.lang.StringBuilder): Unit = out.append(uniform(scope.random, min, max))

/** A uniform choice among the numbers of `decimals` decimals from lowest to highest (both in units of
  * the last decimal): exact, where a double drawn in [min, max) and then rounded could reach max.
  */
private[profile] final class UniformDecimal(lowest: Long, highest: Long, decimals: Int) extends Variable[Scope]:
  def appendTo(scope: Scope, out: java.lang.StringBuilder): Unit =
    Encoding.appendFixed(out, uniform(scope.random, lowest, highest), decimals)

private[profile] final class Choice[S <: Scope](choices: Array[Variable[S]]) extends Variable[S]:
  def appendTo(scope: S, out: java.lang.StringBuilder): Unit =
    choices(scope.random.nextInt(choices.length)).appendTo(scope, out)

/** A value that drifts like a real gauge: each render moves it by up to `step` either way, within
  * [min, max]. The scope keeps its offset from `start`, so a device's untouched slot (0) is at start.
  *
  * @param whole every argument was a whole number: moves by whole steps and renders without decimals
  */
private[profile] final class RandomWalk(slot: Int, start: Double, min: Double, max: Double, step: Double, whole: Boolean)
    extends Variable[Scope]:
  def appendTo(scope: Scope, out: java.lang.StringBuilder): Unit =
    val move =
      if whole then scope.random.nextLong(-step.toLong, step.toLong + 1).toDouble
      else scope.random.nextDouble(-step, step)
    val value = math.min(max, math.max(min, start + scope.walk(slot) + move))
    scope.setWalk(slot, value - start)
    if whole then out.append(value.toLong) else Encoding.appendFixed(out, math.round(value * 100), 2)

/** The truth of a rendered value: `false`, `0` and the empty text are false, anything else true. */
private[profile] object Truth:
  def of(text: CharSequence, from: Int, to: Int): Boolean = to - from match
    case 0 => false
    case 1 => text.charAt(from) != '0'
    case 5 =>
      var i = 0
      while i < 5 && text.charAt(from + i) == "false".charAt(i) do i += 1
      i < 5
    case _ => true

  def append(out: java.lang.StringBuilder, value: Boolean): Unit = out.append(if value then "true" else "false")

/** `true` or `false` as the comparison holds between what its two sides render. */
private[profile] final class Compared[S <: Scope](left: Variable[S], right: Variable[S], comparison: Comparison)
    extends Variable[S]:
  def appendTo(scope: S, out: java.lang.StringBuilder): Unit =
    val from = out.length
    left.appendTo(scope, out)
    val middle = out.length
    right.appendTo(scope, out)
    val holds = comparison.holds(Compared.order(out, from, middle, out.length))
    out.setLength(from)
    Truth.append(out, holds)

private[profile] object Compared:
  /** Negative, zero or positive as out[from, middle) is below, equal to or above out[middle, to): as
    * numbers if both are numbers (so 1.50 == 1.5 and 9 < 10), else as text, char by char.
    */
  def order(out: java.lang.StringBuilder, from: Int, middle: Int, to: Int): Int =
    if isNumber(out, from, middle) && isNumber(out, middle, to) then numeric(out, from, middle, middle, to)
    else
      val common = math.min(middle - from, to - middle)
      var i = 0
      while i < common && out.charAt(from + i) == out.charAt(middle + i) do i += 1
      if i < common then out.charAt(from + i) - out.charAt(middle + i) else (middle - from) - (to - middle)

  /** As a template writes a number: -?[0-9]+(.[0-9]+)? */
  private def isNumber(s: java.lang.StringBuilder, from: Int, to: Int): Boolean =
    val start = if from < to && s.charAt(from) == '-' then from + 1 else from
    val point = digits(s, start, to)
    point > start && (point == to || s.charAt(point) == '.' && point + 1 < to && digits(s, point + 1, to) == to)

  /** Where the digits from `from` end. */
  private def digits(s: java.lang.StringBuilder, from: Int, to: Int): Int =
    var i = from
    while i < to && s.charAt(i) >= '0' && s.charAt(i) <= '9' do i += 1
    i

  private def numeric(s: java.lang.StringBuilder, aFrom: Int, aTo: Int, bFrom: Int, bTo: Int): Int =
    val aNegative = s.charAt(aFrom) == '-'
    val bNegative = s.charAt(bFrom) == '-'
    if aNegative == bNegative then
      val order = magnitude(s, if aNegative then aFrom + 1 else aFrom, aTo, if bNegative then bFrom + 1 else bFrom, bTo)
      if aNegative then -order else order
    else if isZero(s, aFrom, aTo) && isZero(s, bFrom, bTo) then 0 // -0 == 0
    else if aNegative then -1
    else 1

  private def isZero(s: java.lang.StringBuilder, from: Int, to: Int): Boolean =
    var i = from
    while i < to && (s.charAt(i) == '0' || s.charAt(i) == '.' || s.charAt(i) == '-') do i += 1
    i == to

  /** Compares two unsigned numbers: the whole parts by length without leading zeros, then digit by
    * digit, the fractions digit by digit, a missing digit being 0.
    */
  private def magnitude(s: java.lang.StringBuilder, aFrom: Int, aTo: Int, bFrom: Int, bTo: Int): Int =
    var a = aFrom
    var b = bFrom
    while a < aTo && s.charAt(a) == '0' do a += 1
    while b < bTo && s.charAt(b) == '0' do b += 1
    val aWhole = digits(s, a, aTo)
    val bWhole = digits(s, b, bTo)
    var order = (aWhole - a) - (bWhole - b)
    while order == 0 && a < aWhole do
      order = s.charAt(a) - s.charAt(b)
      a += 1
      b += 1
    a = aWhole + 1
    b = bWhole + 1
    while order == 0 && (a < aTo || b < bTo) do
      order = (if a < aTo then s.charAt(a) else '0') - (if b < bTo then s.charAt(b) else '0')
      a += 1
      b += 1
    order

/** `&&` (every operand true) or `||` (any operand true), as `true` or `false`. Operands render in
  * turn only until the answer is known, so one after it draws no randomness.
  */
private[profile] final class Logic[S <: Scope](operands: Array[Variable[S]], and: Boolean) extends Variable[S]:
  def appendTo(scope: S, out: java.lang.StringBuilder): Unit =
    val from = out.length
    var value = and
    var i = 0
    while value == and && i < operands.length do
      operands(i).appendTo(scope, out)
      value = Truth.of(out, from, out.length)
      out.setLength(from)
      i += 1
    Truth.append(out, value)

private[profile] final class Negation[S <: Scope](operand: Variable[S]) extends Variable[S]:
  def appendTo(scope: S, out: java.lang.StringBuilder): Unit =
    val from = out.length
    operand.appendTo(scope, out)
    val value = Truth.of(out, from, out.length)
    out.setLength(from)
    Truth.append(out, !value)

/** `if(condition, then, else)`: only the chosen branch renders, so the other draws no randomness and
  * moves no walk.
  */
private[profile] final class Conditional[S <: Scope](condition: Variable[S], yes: Variable[S], no: Variable[S])
    extends Variable[S]:
  def appendTo(scope: S, out: java.lang.StringBuilder): Unit =
    val from = out.length
    condition.appendTo(scope, out)
    val holds = Truth.of(out, from, out.length)
    out.setLength(from)
    (if holds then yes else no).appendTo(scope, out)

/** The argument left-padded with zeros to `width` digits, after its sign if it has one. */
private[profile] final class ZeroPadded[S <: Scope](arg: Variable[S], width: Int) extends Variable[S]:
  def appendTo(scope: S, out: java.lang.StringBuilder): Unit =
    val from = out.length
    arg.appendTo(scope, out)
    val digitsFrom = if out.length > from && out.charAt(from) == '-' then from + 1 else from
    val missing = width - (out.length - digitsFrom)
    if missing > 0 then out.insert(digitsFrom, ZeroPadded.Zeros, 0, missing)

private[profile] object ZeroPadded:
  val Zeros: String = "0" * 32
  val MaxWidth: Int = Zeros.length
