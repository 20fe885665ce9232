package fleetsim.device

/** Which devices an action reaches. A share is drawn from a seed by each device's number alone, so
  * the same seed and share pick the same devices every run, in one process or over a cluster.
  */
sealed trait Selection:
  def contains(number: Int): Boolean

object Selection:
  case object All extends Selection:
    def contains(number: Int): Boolean = true

  /** The devices whose draw with `seed` falls from `from` until `until` (0 to 1): a share is the
    * slice from 0, and the steps of a wave over a share are slices of one seed, never overlapping.
    */
  final case class Slice(from: Double, until: Double, seed: Long) extends Selection:
    require(from >= 0 && from <= until && until <= 1, s"a share is between 0 and 1 (got $from to $until)")
    def contains(number: Int): Boolean =
      val d = draw(seed, number)
      d >= from && d < until

  /** About `fraction` of the devices (0 to 1), drawn with `seed`. */
  def Share(fraction: Double, seed: Long): Slice = Slice(0, fraction, seed)

  /** A device's draw in [0, 1): SplitMix64's finalizer of the seed and the number, so neighbours differ. */
  def draw(seed: Long, number: Int): Double =
    var z = seed + (number.toLong + 1) * 0x9e3779b97f4a7c15L
    z = (z ^ (z >>> 30)) * 0xbf58476d1ce4e5b9L
    z = (z ^ (z >>> 27)) * 0x94d049bb133111ebL
    z = z ^ (z >>> 31)
    (z >>> 11).toDouble / (1L << 53).toDouble
