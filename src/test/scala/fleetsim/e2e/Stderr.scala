package fleetsim.e2e

import java.io.{ByteArrayOutputStream, OutputStream, PrintStream}

/** What this JVM writes to System.err while a test runs — its log (logback's console appender looks
  * System.err up at each write) and any stack trace an execution context reports — and still
  * writes it there.
  */
object Stderr:
  def during[A](body: => A): (String, A) = synchronized {
    val original = System.err
    val captured = ByteArrayOutputStream() // its writes are synchronized
    val both = new OutputStream:
      def write(b: Int): Unit =
        original.write(b)
        captured.write(b)
      override def write(b: Array[Byte], off: Int, len: Int): Unit =
        original.write(b, off, len)
        captured.write(b, off, len)
    System.setErr(PrintStream(both, true))
    try
      val result = body
      (captured.toString, result)
    finally System.setErr(original)
  }
