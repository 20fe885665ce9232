package fleetsim

import java.net.BindException

/** A server could not listen where it was told: the port is taken, or the address is not one of
  * this machine's. `service` names which of fleetsim's servers it was (http, ssh, mqtt, dashboard),
  * so the user can be told which flag moves it.
  */
final class CannotBind(val host: String, val port: Int, val service: String, val portTaken: Boolean) extends Exception(
  if portTaken then s"port $port ($service) is already in use"
  else s"cannot listen on $host ($service): this machine has no such address")

object CannotBind:
  /** What `e`, thrown by a bind, says; None when it was not about binding. */
  def of(host: String, port: Int, service: String, e: Throwable): Option[CannotBind] =
    Iterator.iterate(e)(_.getCause).takeWhile(_ != null).collectFirst { case b: BindException =>
      // The JDK's words for EADDRNOTAVAIL; anything else a bind refuses is taken for a taken port.
      CannotBind(host, port, service, portTaken = !String.valueOf(b.getMessage).contains("assign requested address"))
    }

  /** For `recoverWith` on a bind: a failed bind becomes [[CannotBind]], anything else stays as it was. */
  def whenBinding[A](host: String, port: Int, service: String): PartialFunction[Throwable, scala.concurrent.Future[A]] =
    Function.unlift((e: Throwable) => of(host, port, service, e).map(scala.concurrent.Future.failed))
