package fleetsim

import org.apache.pekko.actor.{ActorSystem, Scheduler}
import org.apache.pekko.event.NoLogging
import org.scalatest.concurrent.Eventually
import org.scalatest.matchers.should.Matchers
import org.scalatest.time.{Seconds, Span}
import org.scalatest.wordspec.AnyWordSpec

import java.nio.file.{Files, Path}
import java.util.concurrent.atomic.AtomicInteger
import java.util.concurrent.{ConcurrentLinkedQueue, CountDownLatch, ThreadFactory, TimeUnit}
import scala.concurrent.duration.*
import scala.concurrent.{Await, ExecutionContext, Promise}
import scala.jdk.CollectionConverters.*

/** The actor system's scheduler: tasks on time, never early; cancelled ones never; a repeated task
  * until cancelled; the tasks Pekko needs on close run then; and its thread asleep while nothing is
  * due (Pekko's own woke 50 times a second).
  */
class DueSchedulerSpec extends AnyWordSpec with Matchers with Eventually:
  override implicit val patienceConfig: PatienceConfig = PatienceConfig(timeout = Span(5, Seconds))
  private given ExecutionContext = ExecutionContext.global

  /** A scheduler whose one thread is named `name` (at most 15 characters: the kernel's name for it). */
  private def scheduler(name: String = "due-scheduler") =
    val threads: ThreadFactory = r => { val t = Thread(r, name); t.setDaemon(true); t }
    DueScheduler(com.typesafe.config.ConfigFactory.empty(), NoLogging, threads)

  "The due scheduler" should {
    "run a task on its executor once its delay is over, not before" in {
      val s = scheduler()
      val asked = System.nanoTime()
      val ran = Promise[(Long, String)]()
      s.scheduleOnce(150.millis)(ran.success((System.nanoTime(), Thread.currentThread.getName)))
      val (at, thread) = Await.result(ran.future, 5.seconds)
      (at - asked).nanos should be >= 150.millis
      thread should not be "due-scheduler" // handed to the executor, not run on the timer
      s.close()
    }

    "never run a task cancelled before it was due" in {
      val s = scheduler()
      val runs = AtomicInteger()
      val cancelled = s.scheduleOnce(100.millis)(runs.incrementAndGet())
      val after = Promise[Unit]()
      s.scheduleOnce(300.millis)(after.success(()))
      cancelled.cancel() shouldBe true
      cancelled.cancel() shouldBe false
      cancelled.isCancelled shouldBe true
      Await.result(after.future, 5.seconds)
      runs.get shouldBe 0
      s.close()
    }

    "repeat a task at its rate until it is cancelled, one run at a time" in {
      val s = scheduler()
      val times = ConcurrentLinkedQueue[Long]()
      val overlapping = AtomicInteger()
      val running = AtomicInteger()
      val fifth = CountDownLatch(5)
      val start = System.nanoTime()
      val repeated = s.scheduleAtFixedRate(50.millis, 50.millis) { () =>
        if running.incrementAndGet() > 1 then overlapping.incrementAndGet()
        times.add(System.nanoTime())
        fifth.countDown()
        running.decrementAndGet()
      }
      fifth.await(5, TimeUnit.SECONDS) shouldBe true
      repeated.cancel() shouldBe true
      val ran = times.size
      val after = Promise[Unit]()
      s.scheduleOnce(200.millis)(after.success(()))
      Await.result(after.future, 5.seconds)
      times.size shouldBe ran
      overlapping.get shouldBe 0
      // Never early: run i no sooner than i x 50 ms in.
      times.asScala.toSeq.zipWithIndex.foreach((t, i) => (t - start).nanos should be >= (50 * (i + 1)).millis)
      s.close()
    }

    "refuse a task once closed, and run on close the tasks Pekko asks to have run then" in {
      val s = scheduler()
      val onClose = AtomicInteger()
      val plain = AtomicInteger()
      s.scheduleOnce(1.hour, new Scheduler.TaskRunOnClose { def run(): Unit = onClose.incrementAndGet() })
      s.scheduleOnce(1.hour)(plain.incrementAndGet())
      s.close()
      onClose.get shouldBe 1
      plain.get shouldBe 0
      an[IllegalStateException] should be thrownBy s.scheduleOnce(1.second)(())
    }

    "not wake its thread while nothing is due" in {
      val s = scheduler("due-idle-probe")
      val fired = CountDownLatch(1)
      s.scheduleOnce(1.second)(fired.countDown())
      val before = eventually(switches("due-idle-probe")) // once the new thread has its name
      fired.await(5, TimeUnit.SECONDS) shouldBe true
      // Started, slept a second, woke once for the task: a scheduler ticking every 20 ms wakes 50 times.
      (switches("due-idle-probe") - before) should be < 10L
      s.close()
    }

    "not wake its thread for timeouts set and cancelled before they are due" in {
      val s = scheduler("due-timeouts")
      s.scheduleOnce(1.millis)(()) // starts the thread
      val before = eventually(switches("due-timeouts"))
      // A server's request timeouts: each set for 20 s and cancelled as its reply goes out. Were each
      // the earliest task when set, each would wake the thread to wait for it instead.
      for _ <- 1 to 1000 do s.scheduleOnce(20.seconds)(()).cancel()
      (switches("due-timeouts") - before) should be < 20L
      s.close()
    }

    "be the scheduler of an actor system with fleetsim's configuration" in {
      val system = ActorSystem("due-scheduler-spec")
      try system.scheduler shouldBe a[DueScheduler]
      finally system.terminate()
    }
  }

  /** Context switches, voluntary and not, of this process's thread called `name`, as the kernel counts them. */
  private def switches(name: String): Long =
    // A thread of another suite in this JVM may end between the listing and the read: its files are gone.
    def named(t: Path) = scala.util.Try(Files.readString(t.resolve("comm")).trim).toOption.contains(name)
    val task = Files.list(Path.of("/proc/self/task")).iterator.asScala.find(named)
      .getOrElse(fail(s"no thread called $name"))
    Files.readAllLines(task.resolve("status")).asScala.collect { case l if l.contains("ctxt_switches") => l.split("\\s+").last.toLong }.sum
