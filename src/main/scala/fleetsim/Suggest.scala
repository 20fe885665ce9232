package fleetsim

/** "Did you mean": the known name a typo was most likely meant to be. */
object Suggest:
  /** The known name fewest edits away from `name`, if within two edits. */
  def closest(name: String, known: Iterable[String]): Option[String] = closestBy(name, known)(identity)

  /** The known thing whose name is fewest edits away from `name`, if within two edits. */
  def closestBy[A](name: String, known: Iterable[A])(nameOf: A => String): Option[A] =
    known.map(k => k -> distance(name, nameOf(k))).filter(_._2 <= 2).minByOption(_._2).map(_._1)

  private def distance(a: String, b: String): Int =
    val d = Array.tabulate(a.length + 1, b.length + 1)((i, j) => if i == 0 then j else if j == 0 then i else 0)
    for i <- 1 to a.length; j <- 1 to b.length do
      d(i)(j) = Seq(d(i - 1)(j) + 1, d(i)(j - 1) + 1, d(i - 1)(j - 1) + (if a(i - 1) == b(j - 1) then 0 else 1)).min
    d(a.length)(b.length)
