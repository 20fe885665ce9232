package fleetsim.transport

import org.scalatest.wordspec.AnyWordSpec

class SourceAddressesSpec extends AnyWordSpec:
  private def parse(text: String) = SourceAddresses.parse(text)

  "a block" should {
    "give every address of it, a device always the same one" in {
      val block = parse("127.0.1.0/28").toOption.get
      assert(block.size == 16)
      assert((0 until 32).map(block.of(_).getHostAddress) == (0 until 32).map(i => s"127.0.1.${i % 16}"))
      assert(block.samples.map(_.getHostAddress) == Seq("127.0.1.0", "127.0.1.15"))
    }
    "start at the block's first address, whatever address it is written with" in {
      assert(parse("127.0.1.77/24").toOption.get.of(0).getHostAddress == "127.0.1.0")
      assert(parse("127.0.0.9/32").toOption.get.size == 1)
    }
  }

  "a list" should {
    "go round its addresses" in {
      val list = parse("127.0.0.2, 127.0.0.3").toOption.get
      assert((0 until 3).map(list.of(_).getHostAddress) == Seq("127.0.0.2", "127.0.0.3", "127.0.0.2"))
    }
  }

  "bad input" should {
    "say what is wrong, never look a name up" in {
      assert(parse("127.0.1.0/33") == Left("'127.0.1.0/33': the prefix length must be a number from 8 to 32"))
      assert(parse("localhost") == Left("'localhost' is not an IP address"))
      assert(parse("127.0.0.2,") == Left("'' is not an IP address"))
      assert(parse("::1/64").left.exists(_.contains("only IPv4 blocks")))
      assert(parse("1/2/3").left.exists(_.contains("neither a block")))
    }
  }
