package fleetsim.controller

import org.apache.pekko.http.scaladsl.model.*
import org.apache.pekko.http.scaladsl.server.Directives.*
import org.apache.pekko.http.scaladsl.server.{Directive0, Route}

import java.nio.charset.StandardCharsets.UTF_8
import java.security.MessageDigest
import java.util.HexFormat
import java.util.concurrent.{ConcurrentHashMap, ThreadLocalRandom}
import java.util.concurrent.atomic.AtomicReference
import javax.crypto.Mac
import javax.crypto.spec.SecretKeySpec
import scala.jdk.CollectionConverters.*

/** The reference controller's other dialects, one per built-in device profile besides ap-v1, so
  * that each runs against it in one command. They share the registry's config version and tallies.
  *
  * @param faulty the fault switches, applied per message kind
  */
private final class Dialects(registry: Registry, settings: ControllerSettings, faulty: String => Directive0):
  /** What both dialects know of a device: the config version it said it applied. */
  private val applied = ConcurrentHashMap[String, java.lang.Long]()

  /** Devices that applied the current config, in the dialects. */
  def upToDate: Int = applied.values.asScala.count(_ == registry.configSeq)

  val route: Route = concat(pathPrefix("agent")(agent), pathPrefix("iot" / "v1")(iot))

  // ---- ap-agent: a shared-secret registration, text replies, a config archive by checksum ----

  private final case class AgentKey(key: String, expires: Long)
  private val keys = ConcurrentHashMap[String, AgentKey]()
  /** Agents an admin deleted: their calls get 404 until they register again. */
  private val deleted = ConcurrentHashMap.newKeySet[String]()

  /** Deletes an agent, as an operator removes a device: false when none has that id. */
  def deleteAgent(id: String): Boolean = keys.remove(id) != null && deleted.add(id)
  private val archive = AtomicReference[(Long, Array[Byte], String)]((0L, Array.emptyByteArray, ""))

  // Every reply says which controller sent it: an agent refuses one that does not (a captive portal's page, say).
  private def agent: Route = respondWithHeader(headers.RawHeader("X-Agent-Controller", "true"))(concat(
    (path("register") & post & faulty("join") & formFields("mac", "serial", "ts", "sig")) { (mac, serial, ts, sig) =>
      if !MessageDigest.isEqual(hmac(s"$mac:$ts").getBytes(UTF_8), sig.getBytes(UTF_8)) then unauthorized("join")
      else
        val id = mac.replace(":", "")
        val key = HexFormat.of.formatHex(Array.fill[Byte](16)(ThreadLocalRandom.current().nextInt().toByte))
        val lifetime = settings.agentKeyLifetime.toMillis
        keys.put(id, AgentKey(key, if lifetime > 0 then System.currentTimeMillis() + lifetime else Long.MaxValue))
        deleted.remove(id)
        registry.countReceived("join")
        text(s"id: $id\nkey: $key\npoll: ${settings.heartbeatInterval.toSeconds}\n")
    },
    pathPrefix("devices" / Segment) { id =>
      (headerValueByName("X-Agent-Key") & extractUnmatchedPath) { (key, rest) =>
        if deleted.contains(id) then
          registry.countRefused(rest.toString.stripPrefix("/")) // checksum, config or applied
          complete(StatusCodes.NotFound)
        else if !Option(keys.get(id)).exists(k => k.key == key && k.expires > System.currentTimeMillis()) then unauthorized("checksum")
        else
          concat(
            (path("checksum") & get & faulty("checksum")) {
              registry.countReceived("checksum")
              text(currentArchive()._3 + "\n")
            },
            (path("config") & get & faulty("config")) {
              registry.countReceived("config")
              val (_, bytes, checksum) = currentArchive()
              respondWithHeader(headers.RawHeader("X-Checksum", checksum)) {
                complete(HttpEntity(ContentTypes.`application/octet-stream`, bytes))
              }
            },
            (path("applied") & post & faulty("applied") & formField("checksum")) { checksum =>
              registry.countReceived("applied")
              val (seq, _, current) = currentArchive()
              if checksum == current then applied.put(id, seq)
              complete(StatusCodes.NoContent)
            })
      }
    }))

  private def hmac(text: String): String =
    val mac = Mac.getInstance("HmacSHA256")
    mac.init(SecretKeySpec(settings.agentSecret.getBytes(UTF_8), "HmacSHA256"))
    HexFormat.of.formatHex(mac.doFinal(text.getBytes(UTF_8)))

  /** The config archive for the current version: gzip of the config document, and its sha256. */
  private def currentArchive(): (Long, Array[Byte], String) =
    val seq = registry.configSeq
    val cached = archive.get
    if cached._1 == seq then cached
    else
      val bytes = java.io.ByteArrayOutputStream()
      val zip = java.util.zip.GZIPOutputStream(bytes)
      zip.write(s"config $seq\n".repeat((settings.configBytes / 10).max(1)).getBytes(UTF_8))
      zip.close()
      val fresh = (seq, bytes.toByteArray, HexFormat.of.formatHex(MessageDigest.getInstance("SHA-256").digest(bytes.toByteArray)))
      archive.set(fresh)
      fresh

  // ---- iot-telemetry: a pre-provisioned token in the path, JSON telemetry, attributes polled ----

  private def iot: Route = pathPrefix(Segment) { token =>
    if !settings.iotTokens.forall(_.contains(token)) then unauthorized("telemetry")
    else
      concat(
        (path("telemetry") & post & faulty("telemetry") & entity(as[String])) { _ =>
          registry.countReceived("telemetry")
          complete(StatusCodes.OK)
        },
        path("attributes") {
          concat(
            (get & faulty("attributes") & parameter("first".?)) { first =>
              registry.countReceived(if first.isDefined then "join" else "attributes")
              complete(HttpEntity(ContentTypes.`application/json`,
                s"""{"shared":{"telemetryIntervalS":${settings.heartbeatInterval.toSeconds},"pollIntervalS":${settings.statsInterval.toSeconds},"configVersion":${registry.configSeq}}}"""))
            },
            (post & faulty("applied") & entity(as[String])) { body =>
              registry.countReceived("applied")
              """"appliedConfigVersion"\s*:\s*(\d+)""".r.findFirstMatchIn(body).foreach(m => applied.put(token, m.group(1).toLong))
              complete(StatusCodes.OK)
            })
        })
  }

  private def text(body: String): Route = complete(HttpEntity(ContentTypes.`text/plain(UTF-8)`, body))

  private def unauthorized(kind: String): Route =
    registry.countRefused(kind)
    complete(StatusCodes.Unauthorized)
