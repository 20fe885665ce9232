package fleetsim

/** A comparison operator, and whether it holds when the left side is below, equal to or above the
  * right: a template's `{{a < b}}` and a run's threshold (`errors.rate < 1%`) alike.
  */
enum Comparison(val symbol: String, below: Boolean, equal: Boolean, above: Boolean):
  case Equal extends Comparison("==", false, true, false)
  case NotEqual extends Comparison("!=", true, false, true)
  case Below extends Comparison("<", true, false, false)
  case AtMost extends Comparison("<=", true, true, false)
  case Above extends Comparison(">", false, false, true)
  case AtLeast extends Comparison(">=", false, true, true)

  /** Whether it holds for `order`, negative, zero or positive as the left side is below, equal or above. */
  def holds(order: Int): Boolean = if order < 0 then below else if order == 0 then equal else above
