package fleetsim.transport

import org.scalatest.wordspec.AnyWordSpec

/** How many I/O threads a fleet takes: as many as its calls need, up to one a core (ADR 0018). */
class IoThreadsSpec extends AnyWordSpec:
  import IoThreads.{loopsFor, Owned, Shared}

  "A fleet whose devices each hold a connection (MQTT)" should {
    "take a loop per 10,000 calls a second, or per 5,000 devices when a reply sets how often they call" in {
      // Publishing every 10 s.
      assert(Seq(1, 10000, 100000, 100001, 190000).map(loopsFor(_, Some(0.1), Owned, cores = 2)) == Seq(1, 1, 1, 2, 2))
      assert(loopsFor(390000, Some(0.1), Owned, cores = 4) == 4 && loopsFor(390000, Some(0.1), Owned, cores = 1) == 1)
      assert(loopsFor(19000, Some(1.0), Owned, cores = 4) == 2, "every second")
      assert(Seq(1, 2000, 5000, 5001, 10000, 19000).map(loopsFor(_, None, Owned, cores = 2)) == Seq(1, 1, 1, 2, 2, 2))
    }
  }

  "A fleet whose calls crowd onto shared connections (plain HTTP)" should {
    "take a loop per 50,000 calls a second, or per 25,000 devices when a reply sets how often they call" in {
      assert(Seq(1, 100000, 500000, 500001).map(loopsFor(_, Some(0.1), Shared, cores = 2)) == Seq(1, 1, 1, 2))
      assert(loopsFor(1000000, Some(1.0), Shared, cores = 16) == 16 && loopsFor(1000000, Some(1.0), Shared, cores = 2) == 2)
      // ap-v1 against the reference controller: the join says how often.
      assert(Seq(1, 20000, 25000, 25001, 1000000).map(loopsFor(_, None, Shared, cores = 2)) == Seq(1, 1, 1, 2, 2))
    }
  }
