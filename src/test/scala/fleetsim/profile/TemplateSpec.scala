package fleetsim.profile

import org.scalatest.wordspec.AnyWordSpec

import java.net.URLEncoder
import java.nio.charset.StandardCharsets.UTF_8
import java.util.SplittableRandom
import java.util.random.RandomGenerator
import scala.collection.mutable

/** Templates: the syntax, each function against a known value, escaping, and each compile error. */
class TemplateSpec extends AnyWordSpec:
  /** A device as a template sees it: named fields, a seeded random source, walk slots in a map. */
  private final class Device(fields: (String, String)*)(seed: Long = 7) extends Scope:
    val values: Map[String, String] = Map("mac" -> "02:00:00:00:00:01", "serial" -> "FS01", "seq" -> "42", "hostname" -> "OpenWrt",
      "uptimeS" -> "120") ++ fields
    val random: RandomGenerator = SplittableRandom(seed)
    private val walks = mutable.Map.empty[Int, Double]
    def walk(slot: Int): Double = walks.getOrElse(slot, 0.0)
    def setWalk(slot: Int, value: Double): Unit = walks(slot) = value

  private def field(name: String): Variable[Device] = (device, out) => out.append(device.values(name))

  private val variables = Seq("mac", "serial", "seq", "name", "key", "hostname", "uptimeS").map(name => name -> field(name)).toMap

  private def compile(text: String, escape: Escape = Escape.None, slots: Slots = Slots()): Template[Device] =
    Template.compile(text, variables.get, escape, slots, variables.keys).fold(e => fail(e), identity)

  private def render(text: String, device: Device = Device()(), escape: Escape = Escape.None): String =
    compile(text, escape).text(device)

  private def error(text: String): String =
    Template.compile(text, variables.get, Escape.None, Slots(), variables.keys).fold(identity, _ => fail(s"'$text' compiled"))

  /** What `text` renders to over many calls on one device. */
  private def draws(text: String, calls: Int = 2000, device: Device = Device()()): Seq[String] =
    val template = compile(text)
    Seq.fill(calls)(template.text(device))

  "A template" should {
    "render literal text as it is, and know it is constant" in {
      val template = compile("GET /api/v1/status?x={y}")
      assert(template.text(Device()()) == "GET /api/v1/status?x={y}")
      assert(template.isConstant)
      assert(template.variables.isEmpty)
    }
    "work out interpolations of literals at compile time" in {
      val template = compile("""{"h":"{{ sha256('abc') }}","n":{{ 2.5 }},"b":"{{ '{{' }}"}""")
      assert(template.isConstant)
      assert(template.text(Device()()) == """{"h":"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad","n":2.5,"b":"{{"}""")
    }
    "append variables, with or without whitespace inside the braces" in {
      val template = compile("/devices/{{mac}}/{{  serial\n}}")
      assert(template.text(Device()()) == "/devices/02:00:00:00:00:01/FS01")
      assert(!template.isConstant)
    }
    "concatenate with +, numbers as written, and group with parentheses" in {
      assert(render("{{ mac + ':' + seq }}") == "02:00:00:00:00:01:42")
      assert(render("{{ upper(('x' + serial)) + -5 + 2.50 }}") == "XFS01-52.50")
    }
    "read strings with escaped quotes and backslashes" in {
      assert(render("""{{ 'it\'s a \\ b' }}""") == """it's a \ b""")
    }
    "list the variables it reads, inside function calls too" in {
      assert(compile("{{ mac }}/{{ sha256(serial + seq) }}/{{ randomInt(1, 2) }}").variables == Set("mac", "serial", "seq"))
    }
    "render after what the caller's builder already holds, escaping only its own values" in {
      val out = java.lang.StringBuilder("\"before\" ")
      compile("{{ name }}!", Escape.Json).render(Device("name" -> "a\"b")(), out)
      assert(out.toString == "\"before\" a\\\"b!")
    }
    "give as bytes the UTF-8 of its text" in {
      for name <- Seq("plain ascii", "café ☃ 😀") do
        val template = compile("{{ name }}/x")
        val device = Device("name" -> name)()
        assert(template.bytes(device).sameElements(template.text(device).getBytes(UTF_8)))
        assert(template.text(device) == s"$name/x")
    }
  }

  "Template functions" should {
    "be listed by name" in {
      assert(Template.functions.toSet == Set("upper", "lower", "urlencode", "base64", "md5", "sha1", "sha256", "hmacSha256",
        "hmacSha256Base64", "randomInt", "randomFloat", "pick", "walk", "pad", "if"))
    }
    "change case, beyond ASCII too" in {
      assert(render("{{ upper(mac + 'abc') }} {{ lower('MiXeD') }}") == "02:00:00:00:00:01ABC mixed")
      assert(render("{{ upper(name) }} {{ lower(serial + 'ÀÉ') }}", Device("name" -> "straße")()) == "STRASSE fs01àé")
    }
    "hash the UTF-8 of their argument to lowercase hex" in {
      val abc = Device("name" -> "abc")()
      assert(render("{{ md5(name) }}", abc) == "900150983cd24fb0d6963f7d28e17f72")
      assert(render("{{ sha1(name) }}", abc) == "a9993e364706816aba3e25717850c26c9cd0d89d")
      assert(render("{{ sha256(name) }}", abc) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
      assert(render("{{ sha256(name) }}", Device("name" -> "é")()) == "4a99557e4033c3539de2eb65472017cad5f9557f7a0625a09f1c3f6e2ba69c4c")
    }
    "sign with HMAC-SHA256 (RFC 4231 case 2), keys fixed or per device, in hex or base64" in {
      val jefe = Device("key" -> "Jefe", "name" -> "what do ya want for nothing?")()
      val hex = "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
      assert(render("{{ hmacSha256('Jefe', name) }}", jefe) == hex)
      assert(render("{{ hmacSha256(key, name) }}", jefe) == hex)
      assert(render("{{ hmacSha256Base64(key, name) }}", jefe) == "W9zBRr9gdU5qBCQmCJV1x1oAPwidJzmDnexYuWTsOEM=")
      assert(render("{{ hmacSha256Base64('Jefe', name) }}", jefe) == "W9zBRr9gdU5qBCQmCJV1x1oAPwidJzmDnexYuWTsOEM=")
      assert(render("{{ hmacSha256(key, 'x') }}", Device("key" -> "")()) == "4cbc96099a6467ce002461f10549b4898265ebe6188b45efacc44293516e62c4")
    }
    "encode base64 from UTF-8 (RFC 4648 vectors)" in {
      val vectors = Seq("" -> "", "f" -> "Zg==", "fo" -> "Zm8=", "foo" -> "Zm9v", "foob" -> "Zm9vYg==", "fooba" -> "Zm9vYmE=",
        "foobar" -> "Zm9vYmFy", "é☃" -> "w6nimIM=")
      for (plain, encoded) <- vectors do assert(render("{{ base64(name) }}", Device("name" -> plain)()) == encoded)
    }
    "urlencode as java.net.URLEncoder does with UTF-8" in {
      val value = "a b&c=d/é~*._-'\"+%😀"
      assert(render("{{ urlencode(name) }}", Device("name" -> value)()) == URLEncoder.encode(value, UTF_8))
      assert(render("{{ urlencode(mac) }}") == "02%3A00%3A00%3A00%3A00%3A01")
    }
    "draw randomInt from [min, max], both ends included" in {
      assert(draws("{{ randomInt(-2, 2) }}").toSet == Set("-2", "-1", "0", "1", "2"))
      assert(draws("{{ randomInt(7, 7) }}", 10).toSet == Set("7"))
    }
    "draw randomFloat from [min, max) with 2 decimals, or as many as asked" in {
      val values = draws("{{ randomFloat(-1, 1) }}")
      assert(values.forall(_.matches("-?[01]\\.[0-9]{2}")))
      assert(values.map(BigDecimal(_)).forall(v => v >= -1 && v < 1))
      assert(values.contains("-1.00") && values.contains("0.99") && values.exists(_.startsWith("-0.0")))
      assert(draws("{{ randomFloat(1.5, 1.52) }}").toSet == Set("1.50", "1.51"))
      assert(draws("{{ randomFloat(0, 5, 0) }}").toSet == Set("0", "1", "2", "3", "4"))
      assert(draws("{{ randomFloat(0.25, 0.26, 3) }}").forall(_.matches("0\\.25[0-9]")))
    }
    "pick each argument, expressions included" in {
      assert(draws("{{ pick('a', 2, mac + '!') }}", 300).toSet == Set("a", "2", "02:00:00:00:00:01!"))
    }
    "draw from the scope's random source, so a seed repeats a run" in {
      val text = "{{ randomInt(0, 1000000) }} {{ randomFloat(0, 1) }} {{ pick('a', 'b', 'c') }}"
      assert(draws(text, 20, Device()(seed = 1)) == draws(text, 20, Device()(seed = 1)))
      assert(draws(text, 20, Device()(seed = 1)) != draws(text, 20, Device()(seed = 2)))
    }
    "walk from start by at most step a call, within [min, max], in whole numbers" in {
      val values = (draws("{{ walk(5, 0, 10, 3) }}", 2000).map(_.toInt))
      assert(values.forall(v => v >= 0 && v <= 10))
      assert((5 +: values).sliding(2).forall { case Seq(a, b) => math.abs(b - a) <= 3 })
      assert(values.contains(0) && values.contains(10)) // clamped at both ends, and reaching them
      assert((5 +: values).sliding(2).exists { case Seq(a, b) => math.abs(b - a) == 3 })
    }
    "walk with 2 decimals when an argument has decimals" in {
      val values = draws("{{ walk(20, 10, 30, 0.5) }}", 500)
      assert(values.forall(_.matches("[0-9]+\\.[0-9]{2}")))
      val numbers = 20.0 +: values.map(_.toDouble)
      assert(numbers.forall(v => v >= 10 && v <= 30))
      assert(numbers.sliding(2).forall { case Seq(a, b) => math.abs(b - a) <= 0.5 + 0.01 })
      assert(numbers.distinct.size > 50)
    }
    "keep a walk's state per call site and per device, as the offset from start" in {
      val slots = Slots()
      val first = compile("{{ walk(0, 0, 1000, 1) }} {{ walk(500, 0, 1000, 1) }}", slots = slots)
      val second = compile("{{ walk(900, 0, 1000, 1) }}", slots = slots)
      assert(slots.count == 3)
      val device = Device()()
      val other = Device()()
      for _ <- 1 to 50 do first.text(device)
      val Array(low, middle) = first.text(device).split(' ').map(_.toInt)
      assert(device.walk(0) == low && device.walk(1) == middle - 500 && device.walk(2) == 0)
      val third = second.text(device).toInt
      assert(math.abs(third - 900) <= 1 && device.walk(2) == third - 900)
      val Array(otherLow, otherMiddle) = first.text(other).split(' ').map(_.toInt)
      assert(otherLow <= 1 && math.abs(otherMiddle - 500) <= 1)
      other.setWalk(0, 300)
      assert(math.abs(first.text(other).split(' ')(0).toInt - 300) <= 1)
    }
    "pad whole numbers with zeros after the sign" in {
      assert(render("{{ pad(seq, 5) }} {{ pad(-7, 3) }} {{ pad(123456, 3) }} {{ pad(0, 1) }}") == "00042 -007 123456 0")
    }
  }

  "Conditions" should {
    "compare as numbers when both sides render as numbers, whole or decimal" in {
      assert(render("{{ 9 < 10 }} {{ 1.50 == 1.5 }} {{ -2 < -1.5 }} {{ 0 == -0.0 }} {{ '007' == 7 }} {{ 0.25 > 0.3 }}") ==
        "true true true true true false")
      assert(render("{{ seq >= 42 }} {{ seq <= 41 }} {{ seq != 42 }} {{ seq > 9 }} {{ uptimeS < 1000 }}") == "true false false true true")
    }
    "compare as text otherwise, lexicographically" in {
      assert(render("{{ 'abc' < 'abd' }} {{ 'b' > 'abc' }} {{ 'ab' < 'abc' }} {{ 'ab' >= 'ab' }} {{ 'B' < 'a' }}") ==
        "true true true true true")
      // One side not a number: "10" is then text, below "9x" as "1" is below "9".
      assert(render("{{ '10' < '9x' }} {{ '10' < '9' }} {{ '1.' == '1.0' }} {{ '+1' == 1 }} {{ '' == 0 }}") ==
        "true false false false false")
      assert(render("{{ mac == '02:00:00:00:00:01' }} {{ hostname != 'OpenWrt' }}") == "true false")
    }
    "combine with ||, then &&, then comparisons, then +, then !" in {
      assert(render("{{ 1 == 1 || 1 == 2 && 1 == 2 }}") == "true") // || (&&), not (||) &&
      assert(render("{{ 1 == 2 && 1 == 1 || 1 == 1 }}") == "true")
      assert(render("{{ 'a' + 'b' == 'ab' }} {{ !seq + 'x' }} {{ !(seq == 1) }} {{ !!mac }}") == "true falsex true true")
      assert(render("{{ seq > 1 && uptimeS >= 60 || hostname == 'x' }}") == "true")
    }
    "count false, 0 and the empty text false, anything else true" in {
      val truth = Seq("false" -> "no", "0" -> "no", "" -> "no", "true" -> "yes", "00" -> "yes", "0.0" -> "yes",
        "False" -> "yes", " " -> "yes", "no" -> "yes")
      for (value, expected) <- truth do
        assert(render("{{ if(name, 'yes', 'no') }}", Device("name" -> value)()) == expected, value)
      assert(render("{{ !'' }} {{ !0 }} {{ !'false' }} {{ !'x' }} {{ '' || 0 }} {{ 'x' && 1 }}") == "true true true false false true")
    }
    "name a device with a stock hostname by its MAC" in {
      val name = "{{ if(hostname == 'OpenWrt', mac, hostname) }}"
      assert(render(name) == "02:00:00:00:00:01")
      assert(render(name, Device("hostname" -> "lobby-ap")()) == "lobby-ap")
    }
    "say warm once a device has sent a message and been up a minute" in {
      val warmth = "{{ if(seq > 1 && uptimeS >= 60, 'warm', 'cold') }}"
      assert(render(warmth) == "warm")
      assert(render(warmth, Device("seq" -> "1")()) == "cold")
      assert(render(warmth, Device("uptimeS" -> "59")()) == "cold")
    }
    "render only the chosen branch of an if: the other draws nothing and moves no walk" in {
      val template = compile("{{ if(name, walk(50, 0, 100, 5), 'idle') }} {{ if(name, 1, randomInt(0, 9)) }}")
      /** The next draw of the device's seed after 20 draws made as `draw` makes them. */
      def after(draw: SplittableRandom => Long) =
        val random = SplittableRandom(7)
        for _ <- 1 to 20 do draw(random)
        random.nextLong()
      val idle = Device("name" -> "")()
      for _ <- 1 to 20 do assert(template.text(idle).startsWith("idle "))
      assert(idle.walk(0) == 0 && idle.random.nextLong() == after(_.nextLong(0, 10))) // randomInt's draws only
      val busy = Device("name" -> "x")()
      for _ <- 1 to 20 do assert(template.text(busy).endsWith(" 1"))
      assert(busy.random.nextLong() == after(_.nextLong(-5, 6))) // the walk's draws only
    }
    "render && and || only until the answer is known" in {
      val device = Device()()
      assert(compile("{{ '' && randomInt(0, 9) == 1 }} {{ 'x' || pick(1, 2) }}").text(device) == "false true")
      assert(device.random.nextLong() == SplittableRandom(7).nextLong())
    }
    "work out conditions on literals at compile time, a literal if's other branch included" in {
      val template = compile("{{ if(1 < 2, 'a', randomInt(0, 9)) }} {{ 'x' == 'x' && !'' }} {{ if('', seq, 'b') }}")
      assert(template.isConstant)
      assert(template.text(Device()()) == "a true b")
    }
    "be a check: a bare expression wrapped in {{ }} holds if it renders true" in {
      def holds(expression: String, device: Device = Device()()) = compile("{{" + expression + "}}").text(device) == "true"
      assert(holds("seq > 1 && uptimeS >= 60"))
      assert(holds("hostname == 'OpenWrt'") && !holds("hostname == 'OpenWrt'", Device("hostname" -> "lobby-ap")()))
      assert(!holds("seq < 10") && holds(" !(mac == '') ") && holds("'}}' == '}}'"))
      assert(!holds("mac")) // a value that is not a comparison is not "true", however truthy
    }
  }

  "Escaping" should {
    val nasty = "say \"hi\" \\ back\nslash\ttab\u0001 é ☃ & a=b"
    "make a value the inside of a JSON string, leaving literal text and numbers alone" in {
      assert(render("{{ name }}", Device("name" -> "line\nbreak\u001f")(), Escape.Json) == "line\\nbreak\\u001f")
      val template = compile("""{"name":"{{ name }}","seq":{{ seq }},"q":"{{ '"' }}"}""", Escape.Json)
      val json = template.text(Device("name" -> nasty)())
      assert(json == """{"name":"say \"hi\" \\ back\nslash\ttab\u0001 é ☃ & a=b","seq":42,"q":"\""}""")
    }
    "form-encode a value, leaving literal text alone" in {
      val template = compile("a=1&name={{ name }}&mac={{ mac }}", Escape.Url)
      assert(template.text(Device("name" -> nasty)()) ==
        s"a=1&name=${URLEncoder.encode(nasty, UTF_8)}&mac=${URLEncoder.encode("02:00:00:00:00:01", UTF_8)}")
    }
    "leave values as they are without it" in {
      assert(render("{{ name }}", Device("name" -> nasty)()) == nasty)
    }
  }

  "Compiling" should {
    "name an unknown variable, where it is, the known ones and the likely one" in {
      assert(error("/x/{{ macc }}") == "unknown variable 'macc' at column 7 (known: hostname, key, mac, name, seq, serial, uptimeS; did you mean mac?)")
      assert(error("{{ zzzzzz }}") == "unknown variable 'zzzzzz' at column 4 (known: hostname, key, mac, name, seq, serial, uptimeS)")
      assert(error("{\n  \"a\": {{ seriall }}\n}").startsWith("unknown variable 'seriall' at line 2, column 11"))
      assert(error("{{ sha256 }}") == "sha256 at column 4 is a function: call it as sha256(x)")
    }
    "name an unknown function and the likely one, or list them" in {
      assert(error("{{ sha265(mac) }}") == "unknown function 'sha265' at column 4 (did you mean sha256?)")
      assert(error("{{ frobnicate(mac) }}").startsWith("unknown function 'frobnicate' at column 4 (functions: upper, lower, "))
    }
    "count a function's arguments" in {
      assert(error("{{ randomInt(1) }}") == "randomInt at column 4 takes 2 arguments (min, max), got 1")
      assert(error("{{ upper(mac, mac) }}") == "upper at column 4 takes 1 argument (x), got 2")
      assert(error("{{ randomFloat(1) }}") == "randomFloat at column 4 takes 2 or 3 arguments (min, max[, decimals]), got 1")
      assert(error("{{ pick() }}") == "pick at column 4 takes at least 1 argument (a, b, ...), got 0")
    }
    "find unclosed braces and stray tokens" in {
      assert(error("ab{{ mac") == "unclosed {{ at column 3")
      assert(error("{{ upper(mac }}") == "expected ) at column 14, got '}'")
      assert(error("{{ mac serial }}") == "expected an operator or }} at column 8, got 's'")
      assert(error("{{ }}") == "empty {{ }} at column 1")
      assert(error("{{ mac + }}") == "expected a value at column 10, got '}'")
    }
    "refuse a malformed condition, where it is" in {
      assert(error("{{ if(seq > 1, 'warm') }}") == "if at column 4 takes 3 arguments (condition, then, else), got 2")
      assert(error("{{ mac == }}") == "expected a value at column 11, got '}'")
      assert(error("{{ mac && }}") == "expected a value at column 11, got '}'")
      assert(error("{{ mac = 'x' }}") == "unknown operator = at column 8 (use == to compare)")
      assert(error("{{ mac & seq }}") == "unknown operator & at column 8 (use && for and)")
      assert(error("{{ mac | seq }}") == "unknown operator | at column 8 (use || for or)")
      assert(error("{{ 1 < seq < 3 }}") == "comparisons do not chain, at column 12 (write a < b && b < c)")
      assert(error("{{ !}}") == "expected a value at column 5, got '}'")
      assert(error("{{ if(hostnam == 'x', 1, 2) }}").startsWith("unknown variable 'hostnam' at column 7"))
      assert(error("{{ iff(mac, 1, 2) }}") == "unknown function 'iff' at column 4 (did you mean if?)")
    }
    "refuse bad literals" in {
      assert(error("{{ 'abc }}") == "unterminated string at column 4")
      assert(error("""{{ 'a\n' }}""") == """unknown escape \n at column 6 (a string knows only \' and \\)""")
      assert(error("{{ 1.2.3 }}") == "bad number '1.2.3' at column 4")
      assert(error("{{ 12ab }}") == "bad number '12ab' at column 4")
      assert(error("{{ 99999999999999999999 }}") == "number 99999999999999999999 at column 4 is too large")
    }
    "check literal arguments: bounds in order, numbers where numbers are needed" in {
      assert(error("{{ randomInt(10, 5) }}") == "randomInt at column 4: min 10 is above max 5")
      assert(error("{{ randomInt(0, seq) }}") == "randomInt at column 17: max must be a whole number, like 10 (got seq)")
      assert(error("{{ randomInt(1.5, 3) }}") == "randomInt at column 14: min must be a whole number, like 10 (got 1.5)")
      assert(error("{{ randomFloat(2, 2) }}") == "randomFloat at column 4: min 2 must be below max 2")
      assert(error("{{ randomFloat(0.001, 0.002) }}") == "randomFloat at column 4: no number of 2 decimals is in [0.001, 0.002)")
      assert(error("{{ randomFloat(0, 1, 12) }}") == "randomFloat at column 22: decimals must be from 0 to 9, got 12")
      assert(error("{{ walk(5, 10, 0, 1) }}") == "walk at column 4: min 10 is above max 0")
      assert(error("{{ walk(50, 0, 10, 1) }}") == "walk at column 4: start 50 is outside [0, 10]")
      assert(error("{{ walk(5, 0, 10, 0) }}") == "walk at column 4: step must be above 0, got 0")
      assert(error("{{ walk(seq, 0, 10, 1) }}") == "walk at column 9: start must be a number, like 2.5 (got seq)")
      assert(error("{{ pad(seq, 0) }}") == "pad at column 13: width must be from 1 to 32, got 0")
    }
  }
