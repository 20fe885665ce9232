package fleetsim.controller

import com.typesafe.config.ConfigFactory
import org.apache.pekko.http.scaladsl.model.*
import org.apache.pekko.http.scaladsl.server.Route
import org.apache.pekko.http.scaladsl.settings.ServerSettings
import org.apache.pekko.http.scaladsl.testkit.{RouteTestTimeout, ScalatestRouteTest}
import org.apache.sshd.common.config.keys.PublicKeyEntry
import org.scalatest.Suite

import java.nio.charset.StandardCharsets.UTF_8
import java.security.{KeyPair, KeyPairGenerator}
import java.util.HexFormat
import javax.crypto.Mac
import javax.crypto.spec.SecretKeySpec

import scala.concurrent.duration.*

/** The reference controller's routes on a real server (pekko-http-testkit's `~!>`: bound on
  * 127.0.0.1 port 0, called over a socket by Pekko's client), sealed as the controller's own server
  * runs them, so that a request no route takes gets the reply a device or a script would (404, 405,
  * 400), and the admin API sees a caller on loopback by its socket.
  */
trait RoutesFixture extends ScalatestRouteTest:
  this: Suite =>

  // The first calls load and link much of Pekko HTTP: on a busy two-core machine that took more than the default second.
  given RouteTestTimeout = RouteTestTimeout(10.seconds)

  val defaults: ControllerSettings = ControllerSettings(ConfigFactory.load())

  given ServerSettings = ServerSettings(system)

  /** One controller's routes over a registry of its own. */
  final class Routes(val settings: ControllerSettings = defaults):
    val registry: Registry = Registry()
    val controller: ControllerRoutes = ControllerRoutes(registry, settings)
    def route: Route = controller.route

  /** `r`'s controller with its MQTT broker (the embedded Moquette, on a free port), stopped after `test`. */
  def withBroker(r: Routes)(test: MqttBroker => Unit): Unit =
    val broker = MqttBroker.start("127.0.0.1", 0, r.registry)
    r.controller.broker = Some(broker)
    try test(broker) finally broker.stop()

  def json(text: String): HttpEntity.Strict = HttpEntity(ContentTypes.`application/json`, text)

  def joinBody(mac: String, sshKey: String = ""): HttpEntity.Strict =
    val key = if sshKey.isEmpty then "" else s""","sshKey":"$sshKey""""
    json(s"""{"mac":"$mac","serial":"FS-$mac","model":"FS-AP-100","firmware":"1.0.0"$key}""")

  /** A device's SSH key pair, and its public key as the OpenSSH line a device sends at join. */
  def sshKeys(): (KeyPair, String) =
    val generator = KeyPairGenerator.getInstance("EC")
    generator.initialize(256)
    val keys = generator.generateKeyPair()
    keys -> PublicKeyEntry.toString(keys.getPublic)

  /** An ap-agent's registration form, signed as the dialect asks: hex HMAC-SHA256 of `mac:ts` under the agent secret. */
  def agentRegistration(mac: String, secret: String = defaults.agentSecret): FormData =
    val ts = "1700000000"
    val hmac = Mac.getInstance("HmacSHA256")
    hmac.init(SecretKeySpec(secret.getBytes(UTF_8), "HmacSHA256"))
    FormData("mac" -> mac, "serial" -> s"FS-$mac", "ts" -> ts, "sig" -> HexFormat.of.formatHex(hmac.doFinal(s"$mac:$ts".getBytes(UTF_8))))
