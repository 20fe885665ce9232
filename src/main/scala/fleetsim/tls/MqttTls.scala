package fleetsim.tls

import com.hivemq.client.mqtt.MqttClientSslConfig

import java.util.concurrent.ConcurrentHashMap
import scala.concurrent.{ExecutionContext, Future}
import scala.jdk.CollectionConverters.*

/** The TLS of MQTT devices' connections (mqtts://), as the HiveMQ client takes it: the broker checked
  * as `trust` says, by name or IP address unless insecure, and with `certificates` each device
  * presenting its own. A device's configuration is made once and kept for its reconnects.
  */
final class MqttTls(trust: Trust, certificates: Option[DeviceCertificates], names: Int => String, protocols: Seq[String])(using
    ExecutionContext):
  private val trustManagers = TlsContexts.trustManagerFactory(trust)
  private val shared = config(None)
  private val own = ConcurrentHashMap[Int, Future[MqttClientSslConfig]]()

  def forDevice(device: Int): Future[MqttClientSslConfig] = certificates match
    case None => Future.successful(shared)
    case Some(source) =>
      val made = own.computeIfAbsent(device, n => source.forDevice(n, names(n)).map(m => config(Some(m))))
      if made.value.exists(_.isFailure) then own.remove(device, made) // tried again on the next connection
      made

  private def config(identity: Option[KeyMaterial]): MqttClientSslConfig =
    val builder = MqttClientSslConfig.builder().trustManagerFactory(trustManagers).protocols(protocols.asJava)
    identity.foreach(m => builder.keyManagerFactory(TlsContexts.keyManagerFactory(m)))
    if trust == Trust.Insecure then builder.hostnameVerifier((_, _) => true)
    builder.build()
