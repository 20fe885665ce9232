package fleetsim.e2e

import org.scalatest.Assertions.fail

import java.io.{BufferedReader, IOException, InputStream, InputStreamReader}
import java.util.concurrent.{LinkedBlockingQueue, TimeUnit}

/** A child process's output, read on a thread of its own (so that the child never blocks on a full
  * pipe), kept whole for failure messages and line by line for a test to wait on.
  */
final class Output(stream: InputStream):
  private val lines = LinkedBlockingQueue[String]()
  private val buffer = StringBuilder()
  private val reader = Thread { () =>
    val in = BufferedReader(InputStreamReader(stream))
    // A killed child's pipe is closed under the reader ("Stream closed"): its output ends there, as at end of stream.
    try Iterator.continually(in.readLine()).takeWhile(_ != null).foreach { line =>
      buffer.synchronized(buffer.append(line).append('\n'))
      lines.put(line)
    }
    catch case _: IOException => ()
  }
  reader.setDaemon(true)
  reader.start()

  def text: String = buffer.synchronized(buffer.toString)

  /** The next line containing `wanted`; fails with the output so far after `seconds`. */
  def await(wanted: String, seconds: Int = 60): String =
    val deadline = System.nanoTime() + seconds * 1_000_000_000L
    Iterator.continually(lines.poll(100, TimeUnit.MILLISECONDS))
      .find(l => (l != null && l.contains(wanted)) || System.nanoTime() > deadline)
      .filter(l => l != null && l.contains(wanted))
      .getOrElse(fail(s"no line with '$wanted' within $seconds s; output:\n$text"))
