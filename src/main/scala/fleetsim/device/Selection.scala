package fleetsim.device

/** Which devices an action reaches. A share is drawn from a seed by each device's number alone, so
  * the same seed and share pick the same devices every run, in one process or over a cluster.
  */
sealed trait Selection:
  def contains(number: Int): Boolean

object Selection:
  case object All extends Selection:
    def contains(number: Int): Boolean = true

  /** About `fraction` of the devices (0 to 1), drawn with `seed`. */
  final case class Share(fraction: Double, seed: Long) extends Selection:
    require(fraction >= 0 && fraction <= 1, s"a share is between 0 and 1 (got $fraction)")
    def contains(number: Int): Boolean = draw(seed, number) < fraction

  /** The devices whose draw with `seed` falls from `from` until `until` (0 to 1): one step of a wave
    * over a share, the steps of one seed never overlapping.
    */
  final case class Slice(from: Double, until: Double, seed: Long) extends Selection:
    def contains(number: Int): Boolean =
      val d = draw(seed, number)
      d >= from && d < until

  /** A device's draw in [0, 1): SplitMix64's finalizer of the seed and the number, so neighbours differ. */
  def draw(seed: Long, number: Int): Double =
    var z = seed + (number.toLong + 1) * 0x9e3779b97f4a7c15L
    z = (z ^ (z >>> 30)) * 0xbf58476d1ce4e5b9L
    z = (z ^ (z >>> 27)) * 0x94d049bb133111ebL
    z = z ^ (z >>> 31)
    (z >>> 11).toDouble / (1L << 53).toDouble
