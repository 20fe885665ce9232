package fleetsim.profile

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
