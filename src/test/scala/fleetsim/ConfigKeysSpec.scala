package fleetsim

import com.typesafe.config.{ConfigFactory, ConfigParseOptions}
import org.scalatest.wordspec.AnyWordSpec

/** Settings a user wrote that the defaults do not have, said with file:line and a suggestion. */
class ConfigKeysSpec extends AnyWordSpec:
  private val reference = ConfigFactory.defaultReference()
  private val Tail = "; the settings are listed in reference.conf and by --help"

  private def check(text: String, known: com.typesafe.config.Config = reference): Option[String] =
    ConfigKeys.unknown(ConfigFactory.parseString(text, ConfigParseOptions.defaults.setOriginDescription("my.conf")), known, "fleetsim")

  "ConfigKeys.unknown" should {
    "accept the known settings, in any HOCON form, and settings outside fleetsim" in {
      assert(check("fleetsim.fleet.devices = 5\nfleetsim { http { request-timeout = 9s }, device.backoff.max = 2m }") == None)
      assert(check("pekko.loglevel = DEBUG\npekko.made-up = 1\nfleetsim-device-mailbox.x = 1\nfleetsim.profile = large") == None)
      assert(check("fleetsim.fleet.devices = ${?DEVICES}") == None)
    }
    "name the first unknown setting by line, with the known one it was meant to be" in {
      assert(check("fleetsim.fleet.devices = 5\nfleetsim.fleet.devcies = 500\nfleetsim.x = 1") ==
        Some(s"my.conf: 2: unknown setting fleetsim.fleet.devcies (did you mean fleetsim.fleet.devices?)$Tail"))
    }
    "suggest a sibling first, then a whole path, then the one setting with that name elsewhere" in {
      def hint(text: String) = check(text).map(_.split(" \\(did you mean ").lift(1).fold("")(_.takeWhile(_ != '?')))
      assert(hint("fleetsim.ssh.usr = x") == Some("fleetsim.ssh.user"))
      assert(hint("fleetsim { controler { heartbeat-interval = 1s } }") == Some("fleetsim.controller.heartbeat-interval"))
      assert(hint("fleetsim.devices = 5") == Some("fleetsim.fleet.devices"))
      assert(hint("fleetsim.http.port = 5") == Some("")) // port is in both controller and dashboard
      assert(hint("fleetsim.fleet.frobnicate = 5") == Some(""))
    }
    "say that a single value was given a block, or a block a single value" in {
      assert(check("fleetsim.fleet = 3").exists(_.contains("fleetsim.fleet is a block of settings, not one value (write fleetsim.fleet.<setting> = ...)")))
      assert(check("fleetsim.fleet = ${base}") == None) // known once resolved; the settings classes read it
      assert(check("fleetsim.fleet.devices { x = 1 }").exists(_.contains("fleetsim.fleet.devices takes one value, not a block of settings")))
      assert(check("fleetsim.profile.name = large").exists(_.contains("fleetsim.profile takes one value")))
    }
    "leave free-form entries (an empty object in the defaults) and the types of values alone" in {
      val known = ConfigFactory.parseString("fleetsim { labels {}, fleet.devices = 1 }")
      assert(check("fleetsim.labels { site = lab, rack.row = 3 }", known) == None)
      assert(check("fleetsim.fleet.devices = lots") == None)
    }
  }
