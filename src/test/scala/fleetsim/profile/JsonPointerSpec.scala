package fleetsim.profile

import org.scalatest.wordspec.AnyWordSpec

import java.nio.charset.StandardCharsets.UTF_8

/** Values read out of JSON replies by RFC 6901 pointers. */
class JsonPointerSpec extends AnyWordSpec:
  private def pointer(text: String): JsonPointer = JsonPointer.compile(text).fold(e => fail(e), identity)

  private def read(text: String, json: String): String = pointer(text).read(json.getBytes(UTF_8))

  "A JSON pointer" should {
    "follow nested objects" in {
      val json = """{"a": {"x": 1, "b": {"c": "deep"}}, "z": 2}"""
      assert(read("/a/b/c", json) == "deep")
      assert(read("/a/x", json) == "1")
      assert(read("/z", json) == "2")
    }
    "take the n-th element of an array, and an index as a key of an object" in {
      val json = """{"items": [{"id": 10}, {"id": 11}, [true]], "map": {"0": "zero"}}"""
      assert(read("/items/1/id", json) == "11")
      assert(read("/items/2/0", json) == "true")
      assert(read("/items/3/id", json) == null)
      assert(read("/items/-", json) == null)
      assert(read("/items/01/id", json) == null)
      assert(read("/map/0", json) == "zero")
    }
    "unescape ~1 to / and ~0 to ~ in keys, and read an empty key" in {
      val json = """{"a/b": {"m~n": "v", "~1": "tilde-one"}, "": "empty"}"""
      assert(read("/a~1b/m~0n", json) == "v")
      assert(read("/a~1b/~01", json) == "tilde-one")
      assert(read("/", json) == "empty")
    }
    "give a string's content unescaped" in {
      assert(read("/s", """{"s": "line\nbreak \"quoted\" back\\slash \u00e9 \ud83d\ude00"}""") == "line\nbreak \"quoted\" back\\slash é 😀")
    }
    "give numbers and booleans as written" in {
      val json = """{"n": -1.5e3, "i": 42, "big": 123456789012345678901234567890, "t": true, "f": false}"""
      assert(read("/n", json) == "-1.5e3")
      assert(read("/i", json) == "42")
      assert(read("/big", json) == "123456789012345678901234567890")
      assert(read("/t", json) == "true")
      assert(read("/f", json) == "false")
      assert(read("", " 7 ") == "7")
    }
    "give null for a missing path, or one through a value that is not an object or array" in {
      val json = """{"a": {"b": 1}, "s": "text"}"""
      assert(read("/nope", json) == null)
      assert(read("/a/c", json) == null)
      assert(read("/a/b/c", json) == null)
      assert(read("/s/0", json) == null)
    }
    "give null for an object, an array or null" in {
      val json = """{"o": {"k": 1}, "a": [1, 2], "n": null}"""
      assert(read("/o", json) == null)
      assert(read("/a", json) == null)
      assert(read("/n", json) == null)
      assert(read("", json) == null)
    }
    "give null for a reply that is not JSON" in {
      for reply <- Seq("", "not json", "<html>500</html>", """{"a": 1""", """{"a": 1} trailing""", """{"a": 01}""", """{"a": 1x}""",
          """{"a": tru}""", """{"a" 1}""", """{"a": "unterminated}""") do
        assert(read("/a", reply) == null, reply)
    }
    "take the first of duplicate keys" in {
      assert(read("/a", """{"a": "first", "a": "second"}""") == "first")
    }
    "find a value after a large sibling it skips, strings with braces and quotes in it" in {
      val sibling = (1 to 5000).map(i => s"""{"id": $i, "tags": ["x", "}]\\"{["], "nested": {"deep": [[[$i]]]}}""").mkString("[", ",", "]")
      val json = s"""{"devices": $sibling, "status": {"state": "ready"}}"""
      assert(read("/status/state", json) == "ready")
      assert(read("/devices/4999/nested/deep/0/0/0", json) == "5000")
    }
    "read several pointers from one reply" in {
      val reply = """{"token": "abc", "expires": 3600, "session": {"id": "s-1"}}""".getBytes(UTF_8)
      assert(Seq("/token", "/expires", "/session/id").map(pointer(_).read(reply)) == Seq("abc", "3600", "s-1"))
    }
  }

  "Compiling a JSON pointer" should {
    "refuse one that does not start with /" in {
      assert(JsonPointer.compile("a/b") == Left("a JSON pointer starts with / (got 'a/b')"))
    }
    "refuse a ~ that is not ~0 or ~1" in {
      assert(JsonPointer.compile("/a~2b") == Left("in a JSON pointer ~ is written ~0 and / is written ~1 (got 'a~2b' in '/a~2b')"))
      assert(JsonPointer.compile("/x/~~01").isLeft)
      assert(JsonPointer.compile("/x/end~").isLeft)
    }
    "keep its text" in {
      assert(pointer("/a~1b/0").toString == "/a~1b/0")
    }
  }
