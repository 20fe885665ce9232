package fleetsim.control

import java.net.URI
import java.net.http.{HttpClient, HttpRequest, HttpResponse}
import java.util.concurrent.TimeUnit
import scala.concurrent.{ExecutionContext, Future}
import scala.jdk.FutureConverters.*
import scala.util.control.NonFatal

/** A call or a command of the user's that a scenario makes at its time, as their own tooling would:
  * a config push to a controller that is not the embedded one, a fault turned on and off in any
  * controller, broker or proxy.
  */
enum UserCall:
  /** An HTTP(S) call: `method` to `url` with `body` and `headers`; a reply other than 2xx failed. */
  case Http(method: String, url: String, body: String, headers: Map[String, String])
  /** A program and its arguments, run without a shell; an exit other than 0 failed. */
  case Command(argv: Seq[String])

  /** Performs it: what went wrong, if anything, in words that hold no secret (no header, no URL's credentials). */
  def perform(blocking: ExecutionContext): Future[Option[String]] = this match
    case Http(method, url, body, headers) =>
      val request = headers.foldLeft(HttpRequest.newBuilder(URI.create(url)).timeout(java.time.Duration.ofSeconds(30))
        .method(method, if body.isEmpty then HttpRequest.BodyPublishers.noBody() else HttpRequest.BodyPublishers.ofString(body)))((r, h) => r.header(h._1, h._2))
      UserCall.client.sendAsync(request.build(), HttpResponse.BodyHandlers.discarding()).asScala
        .map(reply => Option.when(reply.statusCode / 100 != 2)(s"$this answered ${reply.statusCode}"))(using ExecutionContext.parasitic)
        .recover { case NonFatal(e) => Some(s"$this failed: ${e.getClass.getSimpleName}${Option(e.getMessage).fold("")(m => s" ($m)")}") }(using ExecutionContext.parasitic)
    case Command(argv) =>
      Future {
        val process = ProcessBuilder(argv*).redirectOutput(ProcessBuilder.Redirect.DISCARD).redirectError(ProcessBuilder.Redirect.DISCARD).start()
        if !process.waitFor(5, TimeUnit.MINUTES) then { process.destroyForcibly(); Some(s"$this ran past 5 minutes and was stopped") }
        else Option.when(process.exitValue != 0)(s"$this exited with ${process.exitValue}")
      }(using blocking).recover { case NonFatal(e) => Some(s"$this could not start: ${e.getMessage}") }(using ExecutionContext.parasitic)

  /** "POST https://host/path" or the program's name: what a line may say of it. */
  override def toString: String = this match
    case Http(method, url, _, _) => s"$method ${UserCall.withoutCredentials(url)}"
    case Command(argv) => argv.head

object UserCall:
  private lazy val client = HttpClient.newBuilder().connectTimeout(java.time.Duration.ofSeconds(10)).build()

  /** The URL without user:password@ or a query, which may hold a token. */
  def withoutCredentials(url: String): String =
    val u = URI.create(url)
    URI(u.getScheme, null, u.getHost, u.getPort, u.getPath, null, null).toString
