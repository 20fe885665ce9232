package fleetsim.device

import fleetsim.transport.IoThreads
import org.apache.pekko.actor.testkit.typed.scaladsl.ScalaTestWithActorTestKit
import org.apache.pekko.actor.typed.ActorRef
import org.apache.pekko.actor.typed.scaladsl.Behaviors
import org.apache.pekko.actor.typed.scaladsl.adapter.*
import org.apache.pekko.actor.{Actor, Props}
import org.scalatest.wordspec.AnyWordSpecLike

import java.util.concurrent.{Executors, TimeUnit}
import scala.concurrent.duration.*

/** Devices on their transport's I/O threads: each runs on the thread its connection would be on,
  * and the wheel wakes it there. The threads here are two plain single-thread executors.
  */
class DeviceDispatcherSpec extends ScalaTestWithActorTestKit with AnyWordSpecLike:
  private final class TwoThreads extends IoThreads:
    private val executors = IndexedSeq.tabulate(2)(k => Executors.newSingleThreadScheduledExecutor(r => Thread(r, s"io-$k")))
    def size: Int = 2
    def current: Int = executors.indices.find(k => Thread.currentThread.getName == s"io-$k").getOrElse(-1)
    def execute(thread: Int, task: Runnable): Unit = executors(thread).execute(task)
    def after(thread: Int, delay: FiniteDuration)(task: () => Unit): java.util.concurrent.Future[?] =
      executors(thread).schedule((() => task()): Runnable, delay.toNanos, TimeUnit.NANOSECONDS)
    def shutdown(): Unit = executors.foreach(_.shutdown())

  /** Says where it runs when asked to sleep, and again where it wakes. */
  private final class Sleeper(i: Int, wheel: TimingWheel, seen: ActorRef[(Int, String, String)]) extends Actor:
    def receive: Receive = { case what: String =>
      seen ! (i, what, Thread.currentThread.getName)
      if what == "sleep" then wheel.wake(30.millis, TimingWheel.told(self), "woke")
    }

  "Devices on I/O threads" should {
    "run on the thread of their number, and wake there" in {
      val io = TwoThreads()
      val wheel = TimingWheel(on = Some(io))
      val dispatchers = DeviceDispatcher.register(system.classicSystem, io)
      val seen = createTestProbe[(Int, String, String)]()
      // Started as the fleet starts devices: children of a classic actor, on dispatcher io.of(i).
      val fleet = spawn(Behaviors.setup[Unit] { context =>
        (0 until 6).foreach(i => context.actorOf(Props(Sleeper(i, wheel, seen.ref)).withDispatcher(dispatchers(io.of(i)))) ! "sleep")
        Behaviors.empty
      })
      val reports = seen.receiveMessages(12, 5.seconds)
      assert(reports.map(r => (r._1, r._2)).toSet == (0 until 6).flatMap(i => Seq((i, "sleep"), (i, "woke"))).toSet)
      reports.foreach((i, what, thread) => assert(thread == s"io-${i % 2}", s"device $i ran on $thread for $what"))
      testKit.stop(fleet)
      wheel.close()
      io.shutdown()
    }
  }
