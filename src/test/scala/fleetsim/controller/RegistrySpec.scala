package fleetsim.controller

import fleetsim.protocol.ApiCall
import org.scalatest.funsuite.AnyFunSuite
import org.scalatest.matchers.should.Matchers

/** What the reference controller knows of its devices, and the counts a run's summary checks its own against. */
class RegistrySpec extends AnyFunSuite with Matchers:
  test("a device joins once however often it joins again; a forbidden one is forgotten until allowed") {
    val registry = Registry()
    registry.join("02:00:00:00:00:01", "FS1", "AP", "1.0", None, "127.0.0.1")
    registry.join("02:00:00:00:00:01", "FS1", "AP", "1.0", None, "127.0.0.1")
    registry.registered shouldBe 1
    registry.find("02:00:00:00:00:01").map(_.joins) shouldBe Some(2)
    registry.forbid("02:00:00:00:00:01")
    (registry.registered, registry.forbiddenCount, registry.isForbidden("02:00:00:00:00:01")) shouldBe (0, 1, true)
    registry.allow("02:00:00:00:00:01")
    registry.isForbidden("02:00:00:00:00:01") shouldBe false
  }

  test("counts by kind list protocol v1's kinds even at zero, then the other dialects' in name order") {
    val registry = Registry()
    registry.countReceived("heartbeat", throughTunnel = true)
    registry.countReceived("checksum")
    registry.countRefused("config")
    val counts = registry.counts
    counts.received.keys.toSeq shouldBe ApiCall.values.map(_.key).toSeq :+ "checksum"
    counts.received("heartbeat") shouldBe 1
    counts.tunnelled("heartbeat") shouldBe 1
    counts.tunnelled.get("checksum") shouldBe None // a tally lists only the kinds it has seen, besides v1
    counts.refused("config") shouldBe 1
  }

  test("a device's address is counted when it changes, and an uptime going back is a second device with its MAC") {
    val registry = Registry()
    registry.join("02:00:00:00:00:02", "FS2", "AP", "1.0", None, "127.0.0.2")
    val device = registry.find("02:00:00:00:00:02").get
    registry.seenFrom(device, "127.0.0.2")
    registry.counts.addressChanges shouldBe 0
    registry.seenFrom(device, "127.0.0.3")
    registry.counts.addressChanges shouldBe 1
    registry.sawUptime("02:00:00:00:00:02", device, 100)
    registry.sawUptime("02:00:00:00:00:02", device, 100 - Registry.UptimeSlackS) // two heartbeats overtaking each other
    registry.counts.duplicates shouldBe 0
    registry.sawUptime("02:00:00:00:00:02", device, 5) // booted later: another device
    registry.counts.duplicates shouldBe 1
  }

  test("the config version only goes up") {
    val registry = Registry()
    val first = registry.configSeq
    registry.bumpConfig() shouldBe first + 1
    registry.configSeq shouldBe first + 1
  }
