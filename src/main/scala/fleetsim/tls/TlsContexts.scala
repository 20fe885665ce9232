package fleetsim.tls

import java.net.Socket
import java.security.KeyStore
import java.security.cert.X509Certificate
import javax.net.ssl.*
import scala.jdk.CollectionConverters.*

/** Which servers a fleet trusts. */
enum Trust:
  /** The JDK's trust store. */
  case System
  /** These CAs only (--ca-file). */
  case Authorities(certificates: Seq[X509Certificate])
  /** Any certificate, no hostname check (--insecure-tls). */
  case Insecure

/** The TLS contexts and engines fleetsim uses: TLS 1.3 and 1.2. */
object TlsContexts:
  private val Protocols = Seq("TLSv1.3", "TLSv1.2")

  def client(trust: Trust, identity: Option[KeyMaterial]): SSLContext = client(trustManagers(trust), identity)

  /** With trust managers made once for many contexts (one a device): making them is the costly part. */
  def client(trust: Array[TrustManager], identity: Option[KeyMaterial]): SSLContext =
    val context = SSLContext.getInstance("TLS")
    context.init(identity.map(keyManagers).orNull, trust, null)
    context

  /** A client engine for `host:port`. With `verifyHostname`, the server's certificate must name the
    * host (a DNS name) or the address (an IP SAN, when `host` is an address).
    */
  def clientEngine(context: SSLContext, host: String, port: Int, verifyHostname: Boolean, protocols: Seq[String] = Protocols): SSLEngine =
    val engine = context.createSSLEngine(host, port) // host:port also keys the session cache: reconnects resume
    engine.setUseClientMode(true)
    val parameters = engine.getSSLParameters
    parameters.setProtocols(protocols.toArray)
    if verifyHostname then parameters.setEndpointIdentificationAlgorithm("HTTPS")
    if !CertificateAuthority.isAddress(host) then parameters.setServerNames(java.util.List.of(SNIHostName(host)))
    engine.setSSLParameters(parameters)
    engine

  /** A server's context; with `clientAuthority`, its engines admit only clients that present a
    * certificate this CA signed ([[serverEngine]]).
    */
  def server(identity: KeyMaterial, clientAuthority: Option[X509Certificate]): SSLContext =
    val context = SSLContext.getInstance("TLS")
    context.init(keyManagers(identity), clientAuthority.map(ca => trustManagers(Trust.Authorities(Seq(ca)))).orNull, null)
    context

  def serverEngine(context: SSLContext, clientCertificates: Boolean): SSLEngine =
    val engine = context.createSSLEngine()
    engine.setUseClientMode(false)
    engine.setEnabledProtocols(Protocols.toArray)
    engine.setNeedClientAuth(clientCertificates)
    engine

  private def keyManagers(identity: KeyMaterial): Array[KeyManager] = keyManagerFactory(identity).getKeyManagers

  def keyManagerFactory(identity: KeyMaterial): KeyManagerFactory =
    val store = KeyStore.getInstance("PKCS12")
    store.load(null, null)
    store.setKeyEntry("identity", identity.key, Array.emptyCharArray, identity.chain.toArray)
    val factory = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm)
    factory.init(store, Array.emptyCharArray)
    factory

  def trustManagers(trust: Trust): Array[TrustManager] = trust match
    case Trust.System => null
    case Trust.Insecure => Array(TrustingAll)
    case _ => trustManagerFactory(trust).getTrustManagers

  /** The same trust as a factory, as Netty's TLS (the MQTT client's) takes it. */
  def trustManagerFactory(trust: Trust): TrustManagerFactory = trust match
    case Trust.Insecure => io.netty.handler.ssl.util.InsecureTrustManagerFactory.INSTANCE
    case _ =>
      val factory = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm)
      trust match
        case Trust.Authorities(certificates) =>
          val store = KeyStore.getInstance("PKCS12")
          store.load(null, null)
          certificates.zipWithIndex.foreach((c, i) => store.setCertificateEntry(s"ca-$i", c))
          factory.init(store)
        case _ => factory.init(null: KeyStore) // the JDK's trust store
      factory

  /** Extended, so that the JDK does not add a hostname check of its own around it. */
  private object TrustingAll extends X509ExtendedTrustManager:
    def checkClientTrusted(chain: Array[X509Certificate], authType: String): Unit = ()
    def checkServerTrusted(chain: Array[X509Certificate], authType: String): Unit = ()
    def checkClientTrusted(chain: Array[X509Certificate], authType: String, socket: Socket): Unit = ()
    def checkServerTrusted(chain: Array[X509Certificate], authType: String, socket: Socket): Unit = ()
    def checkClientTrusted(chain: Array[X509Certificate], authType: String, engine: SSLEngine): Unit = ()
    def checkServerTrusted(chain: Array[X509Certificate], authType: String, engine: SSLEngine): Unit = ()
    def getAcceptedIssuers: Array[X509Certificate] = Array.empty
