package fleetsim.cluster

import fleetsim.cli.{NodeCommand, Options, Parsed}
import org.scalatest.wordspec.AnyWordSpec

import java.nio.file.Files

/** A node's settings: cluster.conf over the libraries' defaults, the user's --config over cluster.conf. */
class ClusterConfigSpec extends AnyWordSpec:
  private def node(args: String*): com.typesafe.config.Config =
    Options.parse("node", NodeCommand.Flags, args.toList, Map.empty) match
      case Parsed.Settings(config) => ClusterConfig.node(config)
      case Parsed.Help(_) => fail("expected settings")

  "A node's settings" should {
    "take cluster.conf's where the user says nothing" in {
      val c = node()
      assert(c.getString("pekko.actor.provider") == "cluster")
      assert(c.getString("pekko.cluster.split-brain-resolver.stable-after") == "7s")
      assert(c.getString("pekko.cluster.split-brain-resolver.active-strategy") == "keep-majority")
    }
    "let a --config file override cluster.conf, key by key" in {
      val file = Files.createTempFile("fleetsim-node", ".conf")
      Files.writeString(file, "pekko.cluster.split-brain-resolver { stable-after = 20s, active-strategy = keep-oldest }\n")
      val c = node("--config", file.toString)
      assert(c.getString("pekko.cluster.split-brain-resolver.stable-after") == "20s")
      assert(c.getString("pekko.cluster.split-brain-resolver.active-strategy") == "keep-oldest")
      assert(c.getString("pekko.cluster.downing-provider-class").endsWith("SplitBrainResolverProvider")) // the rest still cluster.conf's
      assert(c.getString("pekko.actor.provider") == "cluster")
    }
  }
