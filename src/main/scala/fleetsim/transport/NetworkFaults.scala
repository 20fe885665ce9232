package fleetsim.transport

import org.apache.pekko.Done

import java.util.concurrent.{CompletableFuture, ConcurrentHashMap, TimeUnit}
import java.util.random.RandomGenerator
import scala.concurrent.ExecutionContext.parasitic
import scala.concurrent.duration.*
import scala.concurrent.{Future, Promise}

/** What goes wrong on the fleet's side of the network for the devices a fault reaches. */
enum NetworkFault:
  /** Cut off: their open sessions drop, and every call and session open waits out its timeout and fails, timedOut. */
  case Partition
  /** A bad link: each call waits `latency` more, and a share `loss` of them (0 to 1) is lost, failing timedOut after its timeout. */
  case Degrade(latency: FiniteDuration, loss: Double)

/** Faults on the fleet's side of the network for chosen devices, put in by a wrapper around any
  * transport and any sessions ([[transport]], [[sessions]]), so that they work against any controller
  * and broker: the devices only see their calls fail, as on a real network. The run starts and ends
  * them ([[fleetsim.run.FleetRun]]); while none is on, a call costs one volatile read more.
  *
  * @param timeout how long a lost call or session open waits before it fails, when the call says no timeout of its own
  * @param draws what a degraded link draws its losses from: the calling device's draws, as the
  *   call's render left them, so that `--seed` loses the same calls run after run
  */
final class NetworkFaults(timeout: FiniteDuration, draws: () => RandomGenerator):
  /** The faults on, each with the action it belongs to and the devices it reaches. */
  @volatile private var on = Vector.empty[(Int, Int => Boolean, NetworkFault)]
  /** Open sessions, by device: a partition drops the ones it reaches. Only while a device holds one. */
  private val open = ConcurrentHashMap[Integer, Session]()

  /** Action `action`'s fault starts for the devices `reaches` says. */
  def start(action: Int, reaches: Int => Boolean, fault: NetworkFault): Unit =
    synchronized { on = on :+ (action, reaches, fault) }
    if fault == NetworkFault.Partition then open.forEach((device, session) => if reaches(device) then session.cut()) // no goodbye crosses a cut link

  /** Action `action`'s fault is over. */
  def end(action: Int): Unit = synchronized { on = on.filterNot(_._1 == action) }

  /** The fault on for `device` now, if any: the one started first. */
  private def of(device: Int): NetworkFault =
    val faults = on
    if faults.isEmpty then null
    else faults.collectFirst { case (_, reaches, fault) if reaches(device) => fault }.orNull

  /** `inner`'s calls, through the faults on. */
  def transport(inner: Transport): Transport = new Transport:
    def send(device: Int, request: Request): Future[Reply] = through(of(device), request)(inner.send(device, request))
    def close(): Future[Done] = inner.close()

  /** `inner`'s sessions, through the faults on: a partition fails their opens and drops the open ones. */
  def sessions(inner: Sessions): Sessions = new Sessions:
    def open(device: Int, login: String, offered: Option[SessionOffer], pushed: Push => Unit): Future[Either[SessionFailure, Session]] =
      of(device) match
        case NetworkFault.Partition => later(timeout.toNanos)(Left(SessionFailure.Failed(FailureReason.TimedOut)))
        case _ =>
          inner.open(device, login, offered, pushed).map {
            case Right(session) =>
              val faulty = FaultySession(device, session)
              NetworkFaults.this.open.put(device, faulty)
              session.lost.foreach(_ => NetworkFaults.this.open.remove(device, faulty))(using parasitic)
              Right(faulty)
            case failed => failed
          }(using parasitic)
    def close(): Future[Done] = inner.close()

  private final class FaultySession(device: Int, session: Session) extends Session:
    def send(device: Int, request: Request): Future[Reply] = through(of(device), request)(session.send(device, request))
    def lost: Future[Done] = session.lost
    def close(): Future[Done] = session.close()
    override def cut(): Unit = session.cut()

  /** A call as the fault lets it through: lost (timed out after its timeout), delayed, or as it is. */
  private def through(fault: NetworkFault, request: Request)(send: => Future[Reply]): Future[Reply] = fault match
    case null => send
    case NetworkFault.Partition => lost(request)
    case NetworkFault.Degrade(latency, loss) =>
      if loss > 0 && draws().nextDouble() < loss then lost(request)
      else if latency <= Duration.Zero then send
      else later(latency.toNanos)(()).flatMap(_ => send)(using parasitic)

  private def lost(request: Request): Future[Reply] =
    later(if request.timeout > 0 then request.timeout else timeout.toNanos)(Reply.Failed(FailureReason.TimedOut))

  /** `value`, `nanos` from now, on the JDK's one delay thread: a fault's waits never take a thread each. */
  private def later[A](nanos: Long)(value: => A): Future[A] =
    val done = Promise[A]()
    CompletableFuture.delayedExecutor(nanos, TimeUnit.NANOSECONDS, (task: Runnable) => task.run()).execute(() => done.success(value))
    done.future
