package fleetsim

/** A server could not bind: the port asked for is taken. `service` names which of fleetsim's
  * servers it was (http, ssh, dashboard), so the user can be told which flag moves it.
  */
final class PortInUse(val port: Int, val service: String) extends Exception(s"port $port ($service) is already in use")

object PortInUse:
  /** For `recoverWith` on a bind: a taken port becomes [[PortInUse]], anything else stays as it was. */
  def whenBinding[A](port: Int, service: String): PartialFunction[Throwable, scala.concurrent.Future[A]] =
    case e if e.isInstanceOf[java.net.BindException] || e.getCause.isInstanceOf[java.net.BindException] =>
      scala.concurrent.Future.failed(PortInUse(port, service))
