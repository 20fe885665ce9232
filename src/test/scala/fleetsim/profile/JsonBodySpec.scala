package fleetsim.profile

import org.scalatest.wordspec.AnyWordSpec

/** JSON bodies with conditions: each branch of an `if` is rendered, whatever its condition says of the samples. */
class JsonBodySpec extends AnyWordSpec:
  private val samples = Map("mac" -> JsonBody.Text, "hostname" -> JsonBody.Text, "seq" -> JsonBody.Number,
    "uptimeS" -> JsonBody.Number)

  private def check(text: String) = JsonBody.check(text, samples, Escape.Json)

  "A JSON body" should {
    "take an if whose branches are both numbers, or both quoted, bare or in quotes as they are" in {
      assert(check("""{"n":{{ if(mac == 'x', 1, 2) }}}""").isEmpty)
      assert(check("""{"name":"{{ if(hostname == 'OpenWrt', mac, hostname) }}"}""").isEmpty)
      assert(check("""{"n":{{ if(seq > 1, seq, 0) }},"t":"{{ if(seq > 1 && uptimeS >= 60, 'warm', 'cold') }}"}""").isEmpty)
    }
    "take a comparison or a boolean operator bare: it renders true or false" in {
      assert(check("""{"warm":{{ seq > 1 && uptimeS >= 60 }},"stock":{{ hostname == 'OpenWrt' }},"up":{{ !seq }}}""").isEmpty)
    }
    "refuse an if with a text branch standing bare, even one its samples would not choose" in {
      // seq's sample is 1: the condition is false of it, but a device past its first message says warm.
      val problem = check("""{"t":{{ if(seq > 1, 'warm', 5) }}}""")
      assert(problem.exists(_.contains("quote a text placeholder: \"{{ if(seq > 1, 'warm', 5) }}\"")), problem)
      assert(check("""{"t":{{ if(mac == 'x', 5, if(seq > 1, 6, mac)) }}}""").isDefined)
    }
    "not render a branch a literal condition never chooses" in {
      assert(check("""{"n":{{ if(1 < 2, 5, 'x') }}}""").isEmpty)
    }
  }

  "A value built from others" should {
    "stand in as its rendering least like JSON, over each branch and each pick" in {
      assert(JsonBody.sample("{{ if(seq > 5, seq, 'none') }}", samples, Escape.None) == "none")
      assert(JsonBody.sample("{{ pick(1, 'a') }}", samples, Escape.None) == "a")
      assert(JsonBody.sample("{{ if(mac == 'x', 1, 2) }}", samples, Escape.None) == "1")
      assert(JsonBody.sample("{{ if(hostname == 'OpenWrt', mac, hostname) }}", samples, Escape.None) == JsonBody.Text)
    }
  }
