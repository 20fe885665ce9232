package fleetsim.transport

import com.typesafe.config.ConfigFactory
import org.apache.pekko.actor.typed.ActorSystem
import org.apache.pekko.actor.typed.scaladsl.Behaviors
import org.apache.pekko.stream.StreamTcpException
import org.apache.pekko.stream.scaladsl.{Keep, Sink, Source}
import org.apache.pekko.util.ByteString
import org.scalatest.BeforeAndAfterAll
import org.scalatest.concurrent.Eventually
import org.scalatest.time.{Millis, Seconds, Span}
import org.scalatest.wordspec.AnyWordSpec

import java.net.{InetAddress, InetSocketAddress, StandardSocketOptions}
import java.nio.ByteBuffer
import java.nio.channels.{ServerSocketChannel, SocketChannel}
import scala.concurrent.Await
import scala.concurrent.duration.*
import scala.jdk.CollectionConverters.*
import scala.util.Try

/** The HTTP client's own TCP connections, against the JDK's sockets on loopback: bytes both ways in
  * order, a server that stops reading, a half-close, every way a connection fails, and one thread for
  * them all.
  */
class SocketsSpec extends AnyWordSpec with Eventually with BeforeAndAfterAll:
  override given patienceConfig: PatienceConfig = PatienceConfig(Span(10, Seconds), Span(20, Millis))
  // Lazy: the test engine also makes an instance of the suite only to list its tests.
  private lazy val system: ActorSystem[Nothing] = ActorSystem(Behaviors.empty, "sockets", ConfigFactory.load())
  private given ActorSystem[Nothing] = system
  private lazy val sockets = Sockets(system)
  private val cores = Runtime.getRuntime.availableProcessors
  override def afterAll(): Unit = system.terminate()

  private def server(): ServerSocketChannel =
    ServerSocketChannel.open().bind(InetSocketAddress(InetAddress.getLoopbackAddress, 0))

  private def address(server: ServerSocketChannel) = server.getLocalAddress.asInstanceOf[InetSocketAddress]

  /** Reads until the peer has sent `n` bytes or closed; what came. */
  private def readUpTo(peer: SocketChannel, n: Int): ByteString =
    val buffer = ByteBuffer.allocate(64 * 1024)
    var got = ByteString.empty
    var open = true
    while open && got.length < n do
      buffer.clear()
      val read = peer.read(buffer)
      if read < 0 then open = false
      else got ++= ByteString.fromArray(buffer.array, 0, read)
    got

  "A socket" should {
    "carry bytes both ways in order, and half-close once what was written has left" in {
      val listening = server()
      try
        val sent = (0 until 2000).map(i => ByteString(s"call $i;"))
        val (input, received) = Source.queue[ByteString](4096)
          .via(sockets.connect(address(listening), None, 5.seconds, 0))
          .toMat(Sink.fold(ByteString.empty)(_ ++ _))(Keep.both).run()
        val peer = listening.accept()
        sent.foreach(input.offer)
        input.complete()
        val all = sent.reduce(_ ++ _)
        // The server reads every byte in order, then the end of the stream: the client half-closed.
        assert(readUpTo(peer, Int.MaxValue) == all)
        peer.write(ByteBuffer.wrap("a reply after the client's half-close".getBytes))
        peer.close()
        assert(Await.result(received, 10.seconds).utf8String == "a reply after the client's half-close")
      finally listening.close()
    }

    "hold what a server does not read, take no more meanwhile, and lose nothing when it reads again" in {
      val listening = server()
      try
        val size = 16 * 1024
        val total = 800 // 12.5 MiB: far more than the two sockets' buffers hold
        val chunks = (0 until total).map(i => ByteString(Array.fill[Byte](size)((i % 251).toByte)))
        val taken = java.util.concurrent.atomic.AtomicInteger()
        val done = Source(chunks).map { c => taken.incrementAndGet(); c }
          .via(sockets.connect(address(listening), None, 5.seconds, 0)).runWith(Sink.ignore)
        val peer = listening.accept()
        // Not read, the server's buffers fill, then the client's, then its stage's batch: it takes no more.
        var last = -1
        eventually(timeout(Span(20, Seconds)), interval(Span(200, Millis))) {
          val now = taken.get
          val still = now == last
          last = now
          assert(still && now < total, s"$now of $total chunks taken")
        }
        assert(readUpTo(peer, Int.MaxValue) == chunks.reduce(_ ++ _)) // all, in order, then the half-close
        peer.close()
        Await.result(done, 10.seconds)
      finally listening.close()
    }

    "as a wire, hand what it reads to its receiver on the loop it was opened on, and say its end once: the server's close, or an abort" in {
      val listening = server()
      try
        final class Heard extends Wire.Receiver:
          val bytes = java.util.concurrent.LinkedBlockingQueue[(String, String)]() // what came, on which thread
          val ends = java.util.concurrent.LinkedBlockingQueue[Option[Throwable]]()
          def received(b: ByteString): Unit = bytes.add(b.utf8String -> Thread.currentThread.getName)
          def ended(failure: Option[Throwable]): Unit = ends.add(failure)
        val heard = Heard()
        val wire = sockets.open(address(listening), None, 5.seconds, heard, 1)
        assert(wire.write(ByteString("GET / HTTP/1.1\r\n\r\n")))
        val peer = listening.accept()
        assert(readUpTo(peer, 18).utf8String == "GET / HTTP/1.1\r\n\r\n")
        peer.write(ByteBuffer.wrap("HTTP/1.1 204 No Content\r\n\r\n".getBytes))
        val (got, thread) = heard.bytes.poll(10, java.util.concurrent.TimeUnit.SECONDS)
        assert(got == "HTTP/1.1 204 No Content\r\n\r\n" && thread == s"sockets-sockets-${1 % cores}", thread)
        peer.close()
        assert(heard.ends.poll(10, java.util.concurrent.TimeUnit.SECONDS) == None)
        wire.close() // closing after the end says nothing more
        assert(!wire.write(ByteString("more")), "an ended wire takes nothing")

        val aborted = Heard()
        val second = sockets.open(address(listening), None, 5.seconds, aborted, 0)
        val held = listening.accept()
        val cause = RuntimeException("stuck")
        second.abort(cause)
        second.close()
        assert(aborted.ends.poll(10, java.util.concurrent.TimeUnit.SECONDS).exists(_ eq cause))
        assert(readUpTo(held, Int.MaxValue).isEmpty, "the server sees the socket closed")
        held.close()
        assert(aborted.ends.poll(200, java.util.concurrent.TimeUnit.MILLISECONDS) == null && heard.ends.isEmpty, "each end is said once")
      finally listening.close()
    }

    "as a wire, stop reading while its receiver is slow to take what came, and lose nothing when it takes it" in {
      val listening = server()
      try
        val gate = java.util.concurrent.CountDownLatch(1)
        val got = java.util.concurrent.ConcurrentLinkedQueue[ByteString]()
        // A receiver runs on its socket's loop: one that is slow holds the loop, which reads nothing meanwhile.
        val wire = sockets.open(address(listening), None, 5.seconds, new Wire.Receiver:
          def received(bytes: ByteString): Unit = { gate.await(); got.add(bytes) }
          def ended(failure: Option[Throwable]): Unit = (), 0)
        val peer = listening.accept()
        val all = ByteString(Array.tabulate[Byte](12 * 1024 * 1024)(i => (i % 251).toByte)) // far more than the sockets' buffers hold
        val sent = java.util.concurrent.atomic.AtomicInteger()
        val writer = Thread(() => all.grouped(16 * 1024).foreach(c => sent.addAndGet(peer.write(c.asByteBuffer))))
        writer.start()
        // The client stops reading, so the server's writes stall: what waits for the receiver is bounded.
        var last = -1
        eventually(timeout(Span(20, Seconds)), interval(Span(200, Millis))) {
          val now = sent.get
          val still = now == last
          last = now
          assert(still && now < all.length, s"${now} of ${all.length} bytes sent")
        }
        gate.countDown()
        writer.join(20000)
        eventually(assert(got.asScala.foldLeft(0)(_ + _.length) == all.length))
        assert(got.asScala.reduce(_ ++ _) == all, "every byte, in order")
        wire.close()
        peer.close()
      finally listening.close()
    }

    "fail a refused connect as StreamTcpException (connectFailed), and a reset after connecting as a broken connection" in {
      val closedPort = { val s = server(); val a = address(s); s.close(); a }
      val refused = Source.maybe[ByteString].via(sockets.connect(closedPort, None, 5.seconds, 0)).runWith(Sink.ignore)
      val e = Try(Await.result(refused, 10.seconds)).failed.get
      assert(e.isInstanceOf[StreamTcpException] && Replies.reason(e) == FailureReason.ConnectFailed, e)

      val listening = server()
      try
        val hello = scala.concurrent.Promise[ByteString]()
        val reset = Source.maybe[ByteString].via(sockets.connect(address(listening), None, 5.seconds, 0))
          .runWith(Sink.foreach(bytes => hello.trySuccess(bytes)))
        val peer = listening.accept()
        peer.write(ByteBuffer.wrap("hello".getBytes))
        assert(Await.result(hello.future, 10.seconds).utf8String == "hello") // connected, as the client sees it
        peer.setOption(StandardSocketOptions.SO_LINGER, Integer.valueOf(0)) // close sends a RST
        peer.close()
        val broken = Try(Await.result(reset, 10.seconds)).failed.get
        assert(!broken.isInstanceOf[StreamTcpException] && Replies.reason(broken) == FailureReason.ProtocolError, broken)
      finally listening.close()
    }

    "fail a connect that is not answered within its timeout as connectFailed" in {
      // A listening socket whose queue is full and never accepted: the kernel drops the next SYN, so the connect hangs.
      val listening = ServerSocketChannel.open().bind(InetSocketAddress(InetAddress.getLoopbackAddress, 0), 1)
      val fillers = (0 until 4).flatMap(_ => Try { val c = SocketChannel.open(); c.configureBlocking(false); c.connect(address(listening)); c }.toOption)
      try
        val started = System.nanoTime()
        val hung = Source.maybe[ByteString].via(sockets.connect(address(listening), None, 500.millis, 0)).runWith(Sink.ignore)
        val e = Try(Await.result(hung, 10.seconds)).failed.get
        assert(Replies.reason(e) == FailureReason.ConnectFailed && e.getMessage.contains("within 500 milliseconds"), e)
        assert((System.nanoTime() - started).nanos >= 500.millis)
      finally
        fillers.foreach(_.close())
        listening.close()
    }

    "close its descriptor when the stream ends, and run all the connections on a loop on its one thread, with a loop at most a core" in {
      def descriptors = java.io.File("/proc/self/fd").list().length
      val listening = server()
      val before = descriptors
      try
        val connections = (0 until 200).map { _ =>
          val (input, done) = Source.queue[ByteString](1).via(sockets.connect(address(listening), None, 5.seconds, 0))
            .toMat(Sink.ignore)(Keep.both).run()
          (input, done, listening.accept())
        }
        val threads = Thread.getAllStackTraces.keySet.asScala.toSeq.map(_.getName).filter(_.startsWith("sockets-sockets-")) // this system's
        assert(threads.count(_ == "sockets-sockets-0") == 1 && threads.size <= cores, threads)
        connections.foreach((input, _, _) => input.complete())
        // Each server side reads the end of the stream, and closing its side ends the client's stream: both closed.
        connections.foreach { (_, done, peer) =>
          assert(readUpTo(peer, Int.MaxValue).isEmpty)
          peer.close()
          Await.result(done, 10.seconds)
        }
        eventually(assert(descriptors <= before))
      finally listening.close()
    }
  }

  "The loops, as I/O threads for devices" should {
    "be as many as the fleet needs up to one a core, run a task on the loop asked for, and a timer not early, nor once cancelled" in {
      assert(sockets.io(1).size == 1 && sockets.io(0).size == 1 && sockets.io(cores + 1).size == cores)
      val io = sockets.io(cores)
      assert(io.current == -1, "a thread of the test's is none of them")
      val ran = java.util.concurrent.LinkedBlockingQueue[(String, Int, Long)]() // what ran, on which loop, when
      val last = io.size - 1
      io.execute(last, () => ran.add(("task", io.current, System.nanoTime())))
      assert(ran.poll(10, java.util.concurrent.TimeUnit.SECONDS) match { case ("task", `last`, _) => true; case _ => false })

      val asked = System.nanoTime()
      val cancelled = io.after(last, 50.millis)(() => ran.add(("cancelled", io.current, System.nanoTime())))
      io.after(last, 150.millis)(() => ran.add(("timer", io.current, System.nanoTime())))
      assert(cancelled.cancel(false))
      // Asked from the loop itself, a timer needs no wake-up to be seen.
      io.execute(0, () => io.after(0, 20.millis)(() => ran.add(("from its loop", io.current, System.nanoTime()))))
      val first = ran.poll(10, java.util.concurrent.TimeUnit.SECONDS)
      assert(first._1 == "from its loop" && first._2 == 0 && first._3 - asked >= 20.millis.toNanos, first)
      val second = ran.poll(10, java.util.concurrent.TimeUnit.SECONDS)
      assert(second._1 == "timer" && second._2 == last && second._3 - asked >= 150.millis.toNanos, second)
      assert(ran.isEmpty, "the cancelled timer never ran")
    }
  }
