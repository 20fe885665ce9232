package fleetsim.profile

import fleetsim.cli.Main
import org.scalatest.wordspec.AnyWordSpec

import java.io.{ByteArrayOutputStream, PrintStream}
import java.nio.file.{Files, Path}

/** Device profiles as a user writes them: every built-in one checks, and each kind of mistake is
  * refused before any device starts, with exit code 2 and one line naming the file and the line.
  */
class ProfileLoaderSpec extends AnyWordSpec:
  private val dir = Files.createTempDirectory("fleetsim-profiles")

  /** Runs the real command line in process: exit code, standard output, standard error. */
  private def fleetsim(args: String*): (Int, String, String) =
    val (out, err) = (ByteArrayOutputStream(), ByteArrayOutputStream())
    val code = Main.run(args.toList, PrintStream(out, true), PrintStream(err, true))
    (code, out.toString, err.toString)

  private def write(name: String, text: String): Path = Files.writeString(dir.resolve(name), text)

  /** A valid profile to break in one place at a time. */
  private val good =
    """name = "mine"
      |join {
      |  path = "/register"
      |  json = '''{"mac":"{{mac}}"}'''
      |  keep { token { json = "/token", type = text } }
      |}
      |messages {
      |  beat {
      |    interval = 10s
      |    path = "/devices/{{mac}}/beat"
      |    headers { Authorization = "Bearer {{token}}" }
      |    keep { version { json = "/version", default = 0 } }
      |  }
      |}
      |triggers {
      |  update {
      |    when { newer = version, than = appliedVersion }
      |    path = "/devices/{{mac}}/config"
      |  }
      |}
      |""".stripMargin.replace("\'\'\'", "\"\"\"")

  /** Checks `text` with `from` replaced by `to`: exit 2, and one line at `line` saying `what`. */
  private def refused(from: String, to: String, line: Int, what: String*): Unit =
    assert(good.contains(from), from)
    val file = write(s"bad-${from.hashCode.abs}.conf", good.replace(from, to))
    val (code, _, err) = fleetsim("profile", "check", file.toString)
    assert(code == 2, err)
    val first = err.linesIterator.next()
    assert(first.startsWith(s"fleetsim: $file:$line: "), err)
    what.foreach(w => assert(first.contains(w), err))
    assert(!err.contains("\tat "), "no stack trace")

  "A profile's requests and reply limits" should {
    "refuse CR or LF in a path or header of its own, and the headers that frame the request" in {
      refused("path = \"/devices/{{mac}}/beat\"", "path = \"/devices/{{mac}}/beat\\r\\nX: 1\"", 10, "messages.beat.path holds CR, LF or NUL")
      refused("Authorization = \"Bearer {{token}}\"", "Authorization = \"Bearer\\n{{token}}\"", 11, "headers.Authorization holds CR, LF or NUL")
      refused("Authorization = \"Bearer {{token}}\"", "Content-Length = \"5\"", 11, "Content-Length is fleetsim's to send")
      refused("Authorization = \"Bearer {{token}}\"", "connection = \"close\"", 11, "connection is fleetsim's to send")
      refused("interval = 10s", "interval = 10s\n    method = HEAD", 10, "method HEAD is not supported")
    }
    "take limits on replies, and say them" in {
      val file = write("limits.conf", good + "limits { body = 16 MiB, headers = 50 }\n")
      val (code, out, err) = fleetsim("profile", "check", file.toString)
      assert(code == 0, err)
      assert(out.contains("replies are read up to: a status line of 1 KiB, 50 header lines, 64 KiB of head, 16 MiB of body (limits)"), out)
      refused("name = \"mine\"", "name = \"mine\"\nlimits { body = lots }", 2, "limits.body must be a size, like 64 KiB or 8 MiB")
      refused("name = \"mine\"", "name = \"mine\"\nlimits { bodies = 1k }", 2, "unknown key 'bodies' in limits")
      refused("name = \"mine\"", "name = \"mine\"\nlimits { headers = 0 }", 2, "limits.headers must be from 1")
    }
  }

  "A profile's schedule" should {
    "give the calls a second a device makes when the profile sets its intervals, which size the fleet's I/O threads, and none when a reply sets one" in {
      val config = com.typesafe.config.ConfigFactory.load()
      def rate(text: String): Option[Double] =
        ProfileLoader.load(write(s"rate-${text.hashCode.abs}.conf", text).toString, FleetContext(_root_.fleetsim.fleet.FleetSettings(config), None, config))
          .callsPerSecond
      assert(rate(good) == Some(0.1))
      // A second message, whose every round is two calls.
      val twoMessages = good.replace("triggers {",
        "messages {\n  stats {\n    interval = 500ms\n    requests = [{ path = \"/a\" }, { path = \"/b\" }]\n  }\n}\ntriggers {")
      assert(rate(twoMessages).exists(r => math.abs(r - 4.1) < 1e-9), rate(twoMessages))
      assert(rate(good.replace("interval = 10s", "interval = version")) == None, "the interval is kept from a reply")
    }
  }

  "profile check" should {
    "pass every built-in profile, and print what devices 0 and 1 send" in {
      Files.writeString(Path.of("devices.csv"), "token\nT0\nT1\n") // iot-telemetry reads it from the current folder
      try
        for name <- ProfileLoader.BuiltIn do
          val (code, out, err) = fleetsim("profile", "check", name)
          assert(code == 0, err)
          assert(out.contains("device 0:") && out.contains("device 1:"), out)
      finally Files.delete(Path.of("devices.csv"))
      val (_, out, _) = fleetsim("profile", "check", "ap-v1")
      assert(out.contains("POST /api/v1/devices/02:00:00:00:00:01/heartbeat"))
      assert(out.contains("\"serial\":\"FS0000000001\""))
    }
    "pass a user's profile, rendering its headers and kept values' defaults" in {
      val (code, out, err) = fleetsim("profile", "check", write("good.conf", good).toString)
      assert(code == 0, err)
      assert(out.contains("message kinds join, beat, update"))
      assert(out.contains("Authorization: Bearer "))
    }
    "pass a JSON body whose numbers stand bare: counters, kept numbers, random numbers, picks of numbers or booleans" in {
      val numbers = good.replace("interval = 10s", "interval = 10s\n    json = \"\"\"{\"mac\":\"{{ upper(mac) }}\",\"n\":{{number}}," +
        "\"seq\":{{seq}},\"v\":{{version}},\"cpu\":{{ randomInt(-5, 99) }},\"t\":{{ walk(20, 0, 40, 0.5) }},\"f\":{{ randomFloat(0, 1) }}," +
        "\"ch\":{{ pick(1, 6, 11) }},\"on\":{{ pick('true', 'false') }},\"raw\":[{{ '1,2' }}]}\"\"\"")
      val (code, out, err) = fleetsim("profile", "check", write("numbers.conf", numbers).toString)
      assert(code == 0, err)
      assert(out.contains("{\"mac\":\"02:00:00:00:00:01\",\"n\":1,\"seq\":1,\"v\":0,\"cpu\":"), out)
    }
    "show a built-in profile's text, and name the built-ins for a typo" in {
      val (code, out, _) = fleetsim("profile", "show", "ap-agent")
      assert(code == 0 && out.contains("hmacSha256(secret"))
      val (typo, _, err) = fleetsim("profile", "show", "ap-agnet")
      assert(typo == 2 && err.contains("did you mean ap-agent?"))
    }
  }

  "A profile with a mistake" should {
    "name an unknown variable, with a suggestion" in
      refused("/devices/{{mac}}/beat", "/devices/{{macc}}/beat", 10, "unknown variable 'macc'", "did you mean mac?")
    "name an unknown function" in
      refused("{{mac}}\"}", "{{sha265(mac)}}\"}", 4, "unknown function 'sha265'", "did you mean sha256?")
    "refuse a bad JSON pointer" in
      refused("json = \"/version\"", "json = \"version\"", 12, "JSON pointer")
    "refuse a bad regular expression" in
      refused("json = \"/version\"", "regex = \"version: (\\\\d+\"", 12, "bad regular expression")
    "refuse a trigger naming a value no reply keeps" in
      refused("newer = version", "newer = versoin", 17, "'versoin'", "did you mean version?")
    "refuse a value used before it is read" in
      refused("json = \"\"\"{\"mac\":\"{{mac}}\"}\"\"\"", "json = \"\"\"{\"mac\":\"{{mac}}\",\"t\":\"{{token}}\"}\"\"\"", 4,
        "'token' is read from a reply", "give it a default")
    "refuse a JSON body that is not JSON" in
      refused("{\"mac\":\"{{mac}}\"}", "{\"mac\":\"{{mac}}\"", 4, "is not JSON")
    "refuse a JSON body that a lax parser would take, or that is JSON only if its text values render as numbers" in {
      val body = "{\"mac\":\"{{mac}}\"}"
      val notJson = "join json body is not JSON after rendering"
      refused(body, "{'a':1}", 4, notJson, "(expected '\"' at column 2)", "double quotes, not single")
      refused(body, "{a:1}", 4, notJson, "(expected '\"' at column 2)", "write each key in double quotes: \"a\"")
      refused(body, "[1,2,]", 4, notJson, "(expected value at column 6)", "remove the comma before ]")
      refused(body, "NaN", 4, notJson, "(expected value at column 1)", "JSON has no NaN or Infinity")
      refused(body, "{\"mac\":{{mac}}}", 4, notJson, "(expected value at column 8)", "quote a text placeholder: \"{{mac}}\"")
      // A pick renders each of its choices in turn: one text among numbers is enough to refuse it.
      refused(body, "{\"band\":{{ pick(2, 5, 'six') }}}", 4, notJson, "quote a text placeholder: \"{{ pick(2, 5, 'six') }}\"")
      refused("interval = 10s", "interval = 10s\n    json = \"\"\"{\"seq\":{{seq}},\"at\":{{nowIso}}}\"\"\"", 10,
        "messages.beat json body is not JSON after rendering", "quote a text placeholder: \"{{nowIso}}\"")
    }
    "refuse an unknown key, with a suggestion" in
      refused("interval = 10s", "intervall = 10s", 9, "unknown key 'intervall'", "did you mean interval?")
    "refuse a transport it cannot have, where it says it, before a run starts" in {
      val file = write("tcp.conf", good.replace("name = \"mine\"", "name = \"mine\"\ntransport = tcp"))
      val (code, _, err) = fleetsim("run", "--device-profile", file.toString, "--devices", "1")
      assert(code == 2, err)
      assert(err.linesIterator.next() == s"fleetsim: $file:2: transport must be http, ssh or mqtt (got 'tcp')", err)
    }
    "refuse an MQTT profile's mistakes at their line: a path for a topic, QoS 2, a join" in {
      val mqtt = ProfileLoader.builtInText("iot-mqtt").get
      def refusedMqtt(from: String, to: String, what: String): Unit =
        assert(mqtt.contains(from), from)
        val file = write(s"mqtt-${to.hashCode.abs}.conf", mqtt.replace(from, to))
        val (code, _, err) = fleetsim("profile", "check", file.toString)
        assert(code == 2, err)
        val line = mqtt.replace(from, to).linesIterator.indexWhere(_.contains(to.linesIterator.next().trim)) + 1
        assert(err.linesIterator.next().startsWith(s"fleetsim: $file:$line: ") && err.contains(what), err)
      refusedMqtt("topic = \"devices/{{clientId}}/telemetry\"", "path = \"/telemetry\"", "unknown key 'path'")
      refusedMqtt("    qos = 1\n    json = \"\"\"{\"ts\"", "    qos = 2\n    json = \"\"\"{\"ts\"", "must be 0 or 1")
      refusedMqtt("messages {", "join { path = \"/join\" }\nmessages {", "unknown key 'join'")
      refusedMqtt("    qos = 1\n    json = \"\"\"{\"ts\"", "    keep { x { json = \"/x\" } }\n    qos = 1\n    json = \"\"\"{\"ts\"",
        "keep is for a call to a url; a publish has a topic")
      refusedMqtt("    topic = \"devices/{{clientId}}/applied\"", "    url = \"ftp://127.0.0.1/config\"", "must be an absolute http:// or https:// URL")
    }
    "refuse --transport mqtt with an HTTP profile, and an MQTT profile over HTTP" in {
      val (code, _, err) = fleetsim("run", "--transport", "mqtt", "--device-profile", "ap-v1", "--devices", "1")
      assert(code == 2 && err.contains("--transport mqtt needs an MQTT profile") && err.contains("iot-mqtt"), err)
      val (code2, _, err2) = fleetsim("run", "--transport", "http", "--device-profile", "iot-mqtt", "--devices", "1")
      assert(code2 == 2 && err2.contains("run it with --transport mqtt"), err2)
      val (code3, _, err3) = fleetsim("run", "--broker", "http://127.0.0.1:1883", "--transport", "mqtt", "--devices", "1")
      assert(code3 == 2 && err3.contains("mqtt://127.0.0.1:1883"), err3)
    }
    "refuse a file that is not there, and suggest a built-in profile" in {
      val (code, _, err) = fleetsim("run", "--device-profile", "ap-v2", "--devices", "1")
      assert(code == 2 && err.contains("no device profile 'ap-v2'") && err.contains("did you mean ap-v1?"), err)
    }
  }

  "A profile that plays an agent" should {
    "name its join, and say in profile check what each call expects, how it is tried, and when messages start" in {
      val agent = good.replace("  path = \"/register\"", "  name = register\n  path = \"/register\"\n  expect = [201]\n  reactions { 403 = stop }\n  retry { tries = 3, delay = 2s..15s }\n  timeout = 10s")
        .replace("    interval = 10s", "    interval = 10s\n    first = at-join\n    reactions { 404 = \"stop after 5\" }")
        .replace("name = \"mine\"", "name = \"mine\"\nstart-delay = 0s..10s\nidentity { hw { pick = [ { model = A1, soc = S1, weight = 3 }, { model = B2, soc = S2 } ] } }")
        .replace("json = '''{\"mac\":\"{{mac}}\"}'''".replace("'''", "\"\"\""), "json = \"\"\"{\"mac\":\"{{mac}}\",\"model\":\"{{model}}\",\"soc\":\"{{soc}}\"}\"\"\"")
      val (code, out, err) = fleetsim("profile", "check", write("agent.conf", agent).toString)
      assert(code == 0, err)
      assert(out.contains("message kinds register, beat, update"), out)
      assert(out.contains("(boots, then waits a random 0s..10s before its first call)"), out)
      assert(out.contains("(expects 201; 403: stop; tried up to 3 times, 2s..15s apart; times out after 10s)"), out)
      assert(out.contains("beat (every 10 s; first: at-join)") && out.contains("(404: stop after 5)"), out)
      // A model and its SoC picked together: each device's pair is one of the rows.
      val pairs = "\"model\":\"(\\w+)\",\"soc\":\"(\\w+)\"".r.findAllMatchIn(out).map(m => m.group(1) -> m.group(2)).toSet
      assert(pairs.nonEmpty && pairs.subsetOf(Set("A1" -> "S1", "B2" -> "S2")), out)
    }
    "refuse a name on a message's calls: they are counted under the message's" in
      refused("    interval = 10s", "    interval = 10s\n    name = heartbeat", 10, "counted under the message's name (beat)")
    "refuse an expected status that is none" in
      refused("    interval = 10s", "    interval = 10s\n    expect = [999]", 10, "'999' is not a status")
    "refuse a reaction it does not know, with the ones it does" in
      refused("    interval = 10s", "    interval = 10s\n    reactions { 404 = explode }", 10, "stop or \"stop after N\"", "(got 'explode')")
    "refuse a retry of one try, or a delay that runs backwards" in {
      refused("    interval = 10s", "    interval = 10s\n    retry { tries = 1 }", 10, "retry.tries must be from 2 to 100")
      refused("    interval = 10s", "    interval = 10s\n    retry { tries = 3, delay = 5s..2s }", 10, "the range must run from a duration to one as long or longer")
    }
    "refuse a first send it cannot schedule, and a start delay that is no duration" in {
      refused("    interval = 10s", "    interval = 10s\n    first = soon", 10, "first must be at-join, random-phase or \"after 5s..10s\"")
      refused("name = \"mine\"", "name = \"mine\"\nstart-delay = soon", 2, "start-delay must be a duration or a range of them")
    }
    "refuse a digest it cannot take, a check in braces, and a timeout that is not one" in {
      refused("json = \"/version\"", "digest = crc32", 12, "digest must be md5, sha1 or sha256")
      refused("    interval = 10s", "    interval = 10s\n    check = \"{{version}} == 1\"", 10, "check is an expression, without {{ }}")
      refused("    interval = 10s", "    interval = 10s\n    check = \"versoin == 1\"", 10, "unknown variable 'versoin' at column 1")
      refused("    interval = 10s", "    interval = 10s\n    timeout = -1s", 10, "timeout must be a positive duration")
    }
    "refuse form options without a form, a resume with no device known, rows of a pick that differ" in {
      refused("    interval = 10s", "    interval = 10s\n    form-encoding { trailing-separator = true }", 10, "form-encoding is for a form body")
      refused("name = \"mine\"", "name = \"mine\"\nresume { path = \"/hello\" }", 2, "resume is the call of a device that starts known")
      refused("name = \"mine\"", "name = \"mine\"\nidentity { hw { pick = [ { model = A1, soc = S1 }, { model = B2 } ] } }", 2,
        "every row has the same fields (model, soc)")
    }
    "refuse a key no call would read: a call's own beside its list of calls, liveness with max-failures" in {
      refused("    path = \"/devices/{{mac}}/config\"", "    path = \"/devices/{{mac}}/config\"\n    calls = [ { path = \"/a\" } ]", 18,
        "triggers.update has both calls and path: put path in the calls of calls")
      refused("    interval = 10s", "    interval = 10s\n    liveness = true\n    max-failures = 2", 10, "has both liveness and max-failures")
    }
    "refuse identity.csv's text where it seeds a number" in {
      val csv = write("known.csv", "version\n1\nnew\n")
      refused("name = \"mine\"", s"name = \"mine\"\nidentity.csv = \"$csv\"", 2, "row 3, column version: 'new' is not a number")
    }
  }
