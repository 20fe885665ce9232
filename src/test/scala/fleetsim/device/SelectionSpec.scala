package fleetsim.device

import org.scalatest.funsuite.AnyFunSuite

/** Which devices an action reaches: a share drawn from a seed by each device's number alone. */
class SelectionSpec extends AnyFunSuite:
  private def picked(selection: Selection, devices: Int = 10_000): Set[Int] = (0 until devices).filter(selection.contains).toSet

  test("a share picks about that share of the devices, the same ones for the same seed, others for another") {
    val first = picked(Selection.Share(0.3, 7))
    assert(first.size > 2_850 && first.size < 3_150, first.size) // 3,000 ± 3.3 standard deviations
    assert(picked(Selection.Share(0.3, 7)) == first)
    val other = picked(Selection.Share(0.3, 8))
    assert(other != first && (other intersect first).size < 1_100) // independent draws overlap by about 0.3 × 0.3
    assert(picked(Selection.Share(0.1, 7)).subsetOf(first)) // a smaller share of the same seed is among the larger's
  }

  test("all, none and everything between") {
    assert(picked(Selection.All, 100).size == 100)
    assert(picked(Selection.Share(0, 1), 1_000).isEmpty && picked(Selection.Share(1, 1), 1_000).size == 1_000)
    assertThrows[IllegalArgumentException](Selection.Share(1.5, 1))
  }

  test("a wave's slices of a seed's share never overlap, and together are the share") {
    val slices = (0 until 3).map(k => picked(Selection.Slice(0.1 * k, 0.1 * (k + 1), 7)))
    assert(slices.flatten.size == slices.map(_.size).sum) // disjoint
    assert(slices.flatten.toSet == picked(Selection.Share(0.3, 7)))
  }
