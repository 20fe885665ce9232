package fleetsim.tls

import com.hivemq.client.mqtt.MqttClientSslConfig

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
  private val own = certificates.map(PerDevice(_, names, m => config(Some(m))))

  /** Fails as a KnownFailure (certificateUnusable) when the device's certificate cannot be had. */
  def forDevice(device: Int): Future[MqttClientSslConfig] = own.fold(Future.successful(shared))(_(device))

  private def config(identity: Option[KeyMaterial]): MqttClientSslConfig =
    val builder = MqttClientSslConfig.builder().trustManagerFactory(trustManagers).protocols(protocols.asJava)
    identity.foreach(m => builder.keyManagerFactory(TlsContexts.keyManagerFactory(m)))
    if trust == Trust.Insecure then builder.hostnameVerifier((_, _) => true)
    builder.build()
