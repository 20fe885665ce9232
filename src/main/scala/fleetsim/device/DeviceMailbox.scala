package fleetsim.device

import com.typesafe.config.Config
import org.apache.pekko.actor.{ActorRef, ActorSystem}
import org.apache.pekko.dispatch.{Envelope, MailboxType, MessageQueue, ProducesMessageQueue, UnboundedMessageQueueSemantics}

import java.util.ArrayDeque

/** A device's mailbox: holds nothing once it is empty, where Pekko's default keeps the last
  * message's queue node. At every young collection G1 scans each old object that points to a young
  * one: with the default mailbox that was every device that got a message since the last
  * collection, and the scan was most of each 50-85 ms pause at a million devices (docs/adr/0005).
  * It also saves that node's 24 bytes.
  */
final class DeviceMailbox(settings: ActorSystem.Settings, config: Config)
    extends MailboxType with ProducesMessageQueue[DeviceMailbox.Queue]:
  def create(owner: Option[ActorRef], system: Option[ActorSystem]): MessageQueue = DeviceMailbox.Queue()

object DeviceMailbox:
  /** Where devices find it in the configuration (reference.conf). */
  val id = "fleetsim-device-mailbox"

  /** Most of the time one message waits at most, so it waits in a field; more wait in a queue made
    * for them and dropped when it empties.
    */
  final class Queue extends MessageQueue with UnboundedMessageQueueSemantics:
    private var first: Envelope = null // guarded by this
    private var more: ArrayDeque[Envelope] = null // guarded by this

    def enqueue(receiver: ActorRef, handle: Envelope): Unit = synchronized {
      if first == null then first = handle
      else
        if more == null then more = ArrayDeque(4)
        more.add(handle)
    }

    def dequeue(): Envelope = synchronized {
      val next = first
      if more == null then first = null
      else
        first = more.poll()
        if more.isEmpty then more = null
      next
    }

    def numberOfMessages: Int = synchronized((if first == null then 0 else 1) + (if more == null then 0 else more.size))

    def hasMessages: Boolean = synchronized(first != null)

    def cleanUp(owner: ActorRef, deadLetters: MessageQueue): Unit =
      var next = dequeue()
      while next != null do
        deadLetters.enqueue(owner, next)
        next = dequeue()
