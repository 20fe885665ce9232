package fleetsim.device

import org.apache.pekko.actor.testkit.typed.scaladsl.ScalaTestWithActorTestKit
import org.apache.pekko.actor.typed.scaladsl.adapter.*
import org.apache.pekko.dispatch.{Envelope, MessageQueue, UnboundedMailbox}
import org.scalatest.wordspec.AnyWordSpecLike

/** The devices' mailbox: first in, first out, whether a message waits in its field or its queue. */
class DeviceMailboxSpec extends ScalaTestWithActorTestKit with AnyWordSpecLike:
  private val owner = system.deadLetters.toClassic
  private def envelope(message: Any) = Envelope(message, owner, system.classicSystem)
  private def drain(queue: MessageQueue): List[Any] =
    Iterator.continually(queue.dequeue()).takeWhile(_ != null).map(_.message).toList

  "The device mailbox" should {
    "hand out messages in the order they came, as it fills, empties and fills again" in {
      val queue = DeviceMailbox.Queue()
      assert(!queue.hasMessages && queue.dequeue() == null)
      Seq("a", "b", "c").foreach(m => queue.enqueue(owner, envelope(m)))
      assert(queue.hasMessages && queue.numberOfMessages == 3)
      assert(queue.dequeue().message == "a")
      queue.enqueue(owner, envelope("d"))
      assert(drain(queue) == List("b", "c", "d"))
      assert(!queue.hasMessages && queue.numberOfMessages == 0)
      queue.enqueue(owner, envelope("e"))
      assert(queue.numberOfMessages == 1)
      assert(drain(queue) == List("e"))
    }

    "give what is left to dead letters, in order, when its device stops" in {
      val queue = DeviceMailbox.Queue()
      Seq(1, 2, 3).foreach(m => queue.enqueue(owner, envelope(m)))
      val deadLetters = UnboundedMailbox().create(None, None)
      queue.cleanUp(owner, deadLetters)
      assert(!queue.hasMessages)
      assert(drain(deadLetters) == List(1, 2, 3))
    }
  }
