package fleetsim.device

import com.typesafe.config.ConfigFactory
import fleetsim.transport.IoThreads
import org.apache.pekko.actor.ActorSystem
import org.apache.pekko.dispatch.{Dispatcher, ExecutorServiceFactory, ExecutorServiceFactoryProvider, MessageDispatcher, MessageDispatcherConfigurator}

import java.util.concurrent.atomic.AtomicInteger
import java.util.concurrent.{AbstractExecutorService, ExecutorService, TimeUnit}
import scala.concurrent.duration.*

/** Pekko dispatchers that run devices' actors on their transport's I/O threads ([[IoThreads]]),
  * one dispatcher a thread: device i, deployed on dispatcher `io.of(i)`, runs on the thread its
  * connection is on.
  */
object DeviceDispatcher:
  private val registered = AtomicInteger()

  /** Registers a dispatcher for each of `io`'s threads with `system`; their ids, by thread. Settings
    * other than the thread (throughput) are the default dispatcher's.
    */
  def register(system: ActorSystem, io: IoThreads): IndexedSeq[String] =
    val first = registered.getAndAdd(io.size)
    IndexedSeq.tabulate(io.size) { thread =>
      val id = s"fleetsim-io-dispatcher-${first + thread}"
      val settings = ConfigFactory.parseString(s"id = $id").withFallback(system.dispatchers.defaultDispatcherConfig)
      def duration(key: String) = settings.getDuration(key).toNanos.nanos
      val executor: ExecutorServiceFactoryProvider = (_, _) => new ExecutorServiceFactory:
        def createExecutorService: ExecutorService = OnIoThread(io, thread)
      system.dispatchers.registerConfigurator(id, new MessageDispatcherConfigurator(settings, system.dispatchers.prerequisites):
        private val instance =
          Dispatcher(this, id, settings.getInt("throughput"), duration("throughput-deadline-time"), executor, duration("shutdown-timeout"))
        def dispatcher(): MessageDispatcher = instance)
      id
    }

  /** Pekko shuts an idle dispatcher's executor down and makes another when actors come back; the
    * thread is the transport's, which stops it when its sessions close.
    */
  private final class OnIoThread(io: IoThreads, thread: Int) extends AbstractExecutorService:
    def execute(task: Runnable): Unit = io.execute(thread, task)
    def shutdown(): Unit = ()
    def shutdownNow(): java.util.List[Runnable] = java.util.Collections.emptyList()
    def isShutdown: Boolean = false
    def isTerminated: Boolean = false
    def awaitTermination(timeout: Long, unit: TimeUnit): Boolean = true
