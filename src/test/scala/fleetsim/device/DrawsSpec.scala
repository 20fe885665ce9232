package fleetsim.device

import org.scalatest.wordspec.AnyWordSpec

import java.util.concurrent.{Executors, TimeUnit}

class DrawsSpec extends AnyWordSpec:
  private def firstThree(draws: Draws, number: Int, epoch: Int, what: Int, a: Long, b: Long): Seq[Double] =
    val g = draws.at(number, epoch, what, a, b)
    Seq.fill(3)(g.nextDouble())

  "A run's draws" should {
    "give a device the same choices at the same moment for the same seed, and others for another seed" in {
      val once = firstThree(Draws.seeded(42), 7, 3, Draws.Jitter, 1, 12)
      assert(firstThree(Draws.seeded(42), 7, 3, Draws.Jitter, 1, 12) == once) // another run, another instance
      assert(firstThree(Draws.seeded(43), 7, 3, Draws.Jitter, 1, 12) != once)
      // Each part of the moment moves the choice: device, epoch, what, a, b.
      val others = Seq((8, 3, Draws.Jitter, 1L, 12L), (7, 4, Draws.Jitter, 1L, 12L), (7, 3, Draws.Phase, 1L, 12L),
        (7, 3, Draws.Jitter, 2L, 12L), (7, 3, Draws.Jitter, 1L, 13L))
      for (n, e, w, a, b) <- others do assert(firstThree(Draws.seeded(42), n, e, w, a, b) != once, (n, e, w, a, b))
    }

    "draw the same whichever thread a device runs on" in {
      val draws = Draws.seeded(5)
      val pool = Executors.newFixedThreadPool(4)
      try
        val here = (0 until 100).map(i => firstThree(draws, i, 1, Draws.Phase, 0, 0))
        val there = (0 until 100).map(i => pool.submit(() => firstThree(draws, i, 1, Draws.Phase, 0, 0)))
        assert(there.map(_.get(10, TimeUnit.SECONDS)) == here)
      finally pool.shutdown()
    }

    "spread its choices evenly over [0, 1) across devices and moments" in {
      val draws = Draws.seeded(9)
      val us = for n <- 0 until 10000; seq <- 0 until 5 yield draws.at(n, 1, Draws.Jitter, 0, seq).nextDouble()
      assert(us.forall(u => u >= 0 && u < 1))
      val deciles = us.groupBy(u => (u * 10).toInt).view.mapValues(_.size).toMap
      assert(deciles.size == 10 && deciles.values.forall(n => n > 4500 && n < 5500), deciles) // 5,000 each, give or take
    }
  }
