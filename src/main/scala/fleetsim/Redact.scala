package fleetsim

/** Credentials in URLs (`http://user:pass@host`) never reach the console, a log or a results file. */
object Redact:
  private val UserInfo = """(?i)\b([a-z][a-z0-9+.-]*://)[^/?#@\s"]+@""".r

  /** `text` with the user information of every URL in it replaced by `***`. */
  def urls(text: String): String = UserInfo.replaceAllIn(text, m => java.util.regex.Matcher.quoteReplacement(m.group(1) + "***@"))
