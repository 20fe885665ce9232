package fleetsim.device

import com.github.plokhotnyuk.jsoniter_scala.core.writeToArray
import fleetsim.fleet.FleetSettings
import fleetsim.metrics.FleetMetrics
import fleetsim.profile.{FleetContext, ProfileLoader}
import fleetsim.protocol.{ApiCall, JoinReply}
import fleetsim.transport.{IoThreads, Reply, Request, Transport}
import org.apache.pekko.Done
import org.apache.pekko.actor.testkit.typed.scaladsl.ScalaTestWithActorTestKit
import org.apache.pekko.actor.typed.ActorRef
import org.apache.pekko.actor.typed.scaladsl.Behaviors
import org.apache.pekko.actor.typed.scaladsl.adapter.*
import org.apache.pekko.actor.{Actor, Props}
import org.scalatest.wordspec.AnyWordSpecLike

import java.util.concurrent.{Executors, TimeUnit}
import scala.concurrent.duration.*
import scala.concurrent.{Future, Promise}

/** Devices on their transport's I/O threads: each runs on the thread its connection would be on,
  * and the wheel wakes it there, with a call rather than a message (docs/adr/0017). The threads
  * here are two plain single-thread executors.
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

    "stop sending once stopped, though the wheel still holds their wake-ups and calls them on their thread" in {
      val io = TwoThreads()
      val wheel = TimingWheel(on = Some(io))
      val dispatchers = DeviceDispatcher.register(system.classicSystem, io)
      // A controller answering on the device's thread, as a connection on its loop does: the join
      // says a heartbeat a second, every other call is ok.
      val heartbeats = createTestProbe[(String, Long)]() // the thread it was sent on, and when
      val transport = new Transport:
        def send(device: Int, request: Request): Future[Reply] =
          val reply = Promise[Reply]()
          val body = if request.kind.key == ApiCall.Join.key then writeToArray(JoinReply(1, 1000, configSeq = 0)) else "{}".getBytes
          if request.kind.key == ApiCall.Heartbeat.key then heartbeats.ref ! (Thread.currentThread.getName, System.nanoTime())
          io.execute(io.of(device), () => reply.success(Reply.Response(200, body)))
          reply.future
        def close(): Future[Done] = Future.successful(Done)
      val config = com.typesafe.config.ConfigFactory.load()
      val profile = ProfileLoader.load("ap-v1", FleetContext(FleetSettings(config), None, config))
      val shared = Device.Shared(profile, DeviceSettings(3, 0.1, BackoffSettings(1.second, 10.seconds)), transport, None, FleetMetrics(profile.kinds), wheel, Draws.seeded(1), dispatchers = dispatchers)
      val parent = spawn(Behaviors.setup[Unit] { context =>
        context.actorOf(Device.props(7, shared))
        Behaviors.empty
      })
      (1 to 2).foreach(_ => assert(heartbeats.receiveMessage(5.seconds)._1 == s"io-${io.of(7)}"))
      testKit.stop(parent) // and so the device, once this returns; its next heartbeat was due within the second
      val stopped = System.nanoTime()
      // Until a second and a half passes with none: any sent since the stop is one too many.
      Iterator.continually(scala.util.Try(heartbeats.receiveMessage(1500.millis))).takeWhile(_.isSuccess).foreach { sent =>
        assert(sent.get._2 < stopped, "a heartbeat sent after the device stopped")
      }
      wheel.close()
      io.shutdown()
    }
  }
