package fleetsim.fleet

import fleetsim.device.{BackoffSettings, DeviceSettings}
import org.scalatest.wordspec.AnyWordSpec

import scala.concurrent.duration.*

/** The pure arithmetic behind ramps, identities, backoff, jitter and the descriptor budget. */
class SchedulesSpec extends AnyWordSpec:
  "Ramp.due" should {
    "start one device at once, then follow the rate, and never pass the target" in {
      assert(Ramp.due(Duration.Zero, 100, 1000) == 1)
      assert(Ramp.due(1.second, 100, 1000) == 101)
      assert(Ramp.due(2500.millis, 0.5, 1000) == 2)
      assert(Ramp.due(1.hour, 100, 1000) == 1000)
    }
  }

  "FleetSettings.mac" should {
    "give device i the base MAC plus i, carrying across bytes" in {
      val fleet = FleetSettings(1000, 100, None, FleetSettings.parseMac("02:00:00:00:00:ff"))
      assert(fleet.mac(0) == "02:00:00:00:00:ff")
      assert(fleet.mac(1) == "02:00:00:00:01:00")
    }
    "refuse a MAC base that is not six hex bytes" in {
      val e = intercept[IllegalArgumentException](FleetSettings.parseMac("02:00:00"))
      assert(e.getMessage.contains("02:00:00:00:00:00"))
    }
  }

  "Backoff" should {
    val backoff = BackoffSettings(1.second, 60.seconds)
    "double its ceiling with each failure up to the maximum, with full jitter below it" in {
      assert(backoff.delay(0, 0.999) < 1.second)
      assert(backoff.delay(3, 0.999) > 7.seconds && backoff.delay(3, 0.999) < 8.seconds)
      assert(backoff.delay(40, 0.999) < 60.seconds && backoff.delay(40, 0.999) > 59.seconds)
      assert(backoff.delay(5, 0.0) == Duration.Zero)
    }
  }

  "Jitter" should {
    "move a periodic send by at most its fraction of the interval" in {
      val device = DeviceSettings(3, 0.1, BackoffSettings(1.second, 2.seconds))
      val ten = 10.seconds.toNanos
      assert(device.jittered(ten, 0.0) == 9.seconds.toNanos)
      assert(device.jittered(ten, 0.5) == ten)
      assert(device.jittered(ten, 0.9999) < 11.seconds.toNanos)
      assert(device.jittered(ten, 0.0, fraction = 0.5) == 5.seconds.toNanos) // a message's own jitter
      assert(device.jittered(0, 0.5) == 1.millis.toNanos) // never a spin
    }
  }

  "DescriptorBudget" should {
    "refuse a fleet that cannot fit the open-file limit, with the numbers and what to do" in {
      val refusal = DescriptorBudget.check(10000, 0, embeddedController = true, limit = Some(20000))
      assert(refusal.left.exists(m => m.contains("20150") && m.contains("20000") && m.contains("--max-connections") && m.contains("own process")))
      assert(DescriptorBudget.check(10000, 0, embeddedController = false, limit = Some(20000)) == Right(10150))
      assert(DescriptorBudget.check(10000, 0, embeddedController = true, limit = None).isRight)
      // A connection a device (--source-ips, per-call profiles): fewer devices, not a smaller pool.
      val own = DescriptorBudget.check(10000, 0, embeddedController = true, limit = Some(20000), shared = false)
      assert(own.left.exists(m => m.contains("lower --devices") && !m.contains("--max-connections")), own)
    }
    "count a tunnel per device, and suggest spreading an SSH fleet" in {
      assert(DescriptorBudget.check(512, 8000, embeddedController = false, limit = Some(20000)) == Right(8662))
      val refusal = DescriptorBudget.check(512, 10000, embeddedController = true, limit = Some(20000))
      assert(refusal.left.exists(m => m.contains("10000 SSH tunnels") && m.contains("spread the fleet") && m.contains("own process") &&
        m.contains("lower --devices")), refusal)
    }
    "count MQTT connections, two ends each with the embedded broker, and name --broker" in {
      val broker = fleetsim.run.MqttKind(None, 1).server
      assert(DescriptorBudget.check(0, 19800, embeddedController = false, limit = Some(20000), "MQTT connections", server = broker) == Right(19950))
      val refusal = DescriptorBudget.check(0, 10000, embeddedController = true, limit = Some(20000), "MQTT connections", server = broker)
      // Its devices hold no shared HTTP connections: fewer devices, not fewer connections, make it fit.
      assert(refusal.left.exists(m => m.contains("10000 MQTT connections") && m.contains("--broker") && m.contains("lower --devices") &&
        !m.contains("--max-connections")), refusal)
    }
    "take fleetsim.fleet.max-open-files only where it lowers the process's limit, and name it in the refusal" in {
      val setting = "fleetsim.fleet.max-open-files"
      assert(DescriptorBudget.limit(Some(20000), None) == (Some(20000), "ulimit -n"))
      assert(DescriptorBudget.limit(Some(20000), Some(2400)) == (Some(2400), setting))
      assert(DescriptorBudget.limit(Some(20000), Some(50000)) == (Some(20000), "ulimit -n")) // never past the real limit
      assert(DescriptorBudget.limit(None, Some(2400)) == (Some(2400), setting))
      val (files, name) = DescriptorBudget.limit(Some(20000), Some(2400))
      assert(DescriptorBudget.check(5, 2000, embeddedController = false, files, limitName = name) == Right(2155))
      val refusal = DescriptorBudget.check(6, 3000, embeddedController = false, files, limitName = name)
      assert(refusal.left.exists(m => m.contains("3156") && m.contains(s"2400 ($setting)") && m.contains(s"raise $setting")), refusal)
      val config = com.typesafe.config.ConfigFactory.parseString(s"$setting = 2400").withFallback(com.typesafe.config.ConfigFactory.load())
      assert(FleetSettings(config).maxOpenFiles == Some(2400L))
      assert(FleetSettings(com.typesafe.config.ConfigFactory.load()).maxOpenFiles == None)
    }
  }

  "HeapBudget" should {
    "refuse a fleet whose devices' own TLS connections cannot fit the heap, naming the -Xmx it needs" in {
      val perDevice = fleetsim.run.HttpKind().heapPerDevice(tls = true, ownConnection = true)
      val refusal = HeapBudget.check(10000, perDevice, maxHeap = 275L << 20) // what the launcher gives 10,000 shared-connection devices
      assert(refusal.left.exists(m => m.contains("10000 devices x 30000 bytes") && m.contains("JAVA_OPTS=-Xmx829m")), refusal)
    }
    "pass the heap the launcher picks for each kind of fleet, from the same bytes a device" in {
      // The launcher (./fleetsim) sizes the heap before any JVM starts, from a table of its own: `PATTERN) per_device=N ;;`.
      val table = "(?m)^\\s*(\\S+)\\) per_device=(\\d+) ;;".r.findAllMatchIn(java.nio.file.Files.readString(java.nio.file.Path.of("fleetsim")))
        .map(m => m.group(1) -> m.group(2).toLong).toMap
      for (transport, tls, own, pattern) <- Seq(("http", false, false, "*"), ("http", false, true, "*/no/yes"), ("http", true, true, "*/yes/yes"),
          ("mqtt", false, true, "mqtt/*"), ("mqtt", true, true, "mqtt/yes/*"), ("ssh", false, true, "ssh/*")) do
        val kind = fleetsim.run.TransportKinds.named(transport).get.read(com.typesafe.config.ConfigFactory.load())
        val perDevice = kind.heapPerDevice(tls, own)
        assert(table.get(pattern) == Some(perDevice), s"./fleetsim's $pattern against ${(transport, tls, own)}'s $perDevice")
        val launcher = (256L + 5000L * perDevice * 2 / 1048576) << 20 // fleetsim's own arithmetic, in whole MiB
        assert(HeapBudget.check(5000, perDevice, launcher).isRight, (transport, tls, own))
    }
  }
