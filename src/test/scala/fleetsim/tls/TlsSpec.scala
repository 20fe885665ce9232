package fleetsim.tls

import fleetsim.e2e.Programs
import fleetsim.transport.{FailureReason, Replies}
import org.scalatest.wordspec.AnyWordSpec

import java.net.InetSocketAddress
import java.nio.file.{Files, Path}
import java.util.concurrent.{CompletableFuture, TimeUnit}
import javax.net.ssl.{SSLServerSocket, SSLSocket}
import scala.jdk.CollectionConverters.*
import scala.util.Try

/** Certificates and handshakes with the JDK's TLS stack over loopback sockets, and the files users
  * bring, as openssl writes them.
  */
class TlsSpec extends AnyWordSpec:
  private val ca = CertificateAuthority.create("test CA")
  private val dir = Files.createTempDirectory("fleetsim-tls")

  /** A TLS server on 127.0.0.1 that says one byte on each connection and closes it: the client
    * writes nothing, so no unread byte turns the server's alert into a reset.
    */
  private final class Server(identity: KeyMaterial, clientCa: Option[java.security.cert.X509Certificate]):
    private val context = TlsContexts.server(identity, clientCa)
    private val socket = context.getServerSocketFactory.createServerSocket().asInstanceOf[SSLServerSocket]
    socket.bind(InetSocketAddress("127.0.0.1", 0))
    socket.setNeedClientAuth(clientCa.isDefined)
    val port: Int = socket.getLocalPort
    private val serving = CompletableFuture.runAsync { () =>
      while !socket.isClosed do
        Try {
          val s = socket.accept()
          try { s.setSoTimeout(5000); s.getOutputStream.write(42); s.getOutputStream.flush() }
          finally s.close()
        }
    }
    def close(): Unit = socket.close()

  /** A call from a client: None when it got the server's byte, else why it failed, as a device counts it. */
  private def call(port: Int, host: String, trust: Trust, identity: Option[KeyMaterial] = None): Option[FailureReason] =
    val context = TlsContexts.client(trust, identity)
    val socket = context.getSocketFactory.createSocket().asInstanceOf[SSLSocket]
    try
      socket.setSSLParameters(TlsContexts.clientEngine(context, host, port, verifyHostname = trust != Trust.Insecure).getSSLParameters)
      socket.connect(InetSocketAddress("127.0.0.1", port), 5000)
      socket.setSoTimeout(5000)
      // TLS 1.3 tells of a refused client certificate only after the handshake: read
      if socket.getInputStream.read() == 42 then None else Some(FailureReason.ProtocolError)
    catch case e: Exception => Some(Replies.tlsReason(e).getOrElse(FailureReason.ProtocolError))
    finally socket.close()

  private def withServer(identity: KeyMaterial, clientCa: Option[java.security.cert.X509Certificate] = None)(test: Int => Unit): Unit =
    val server = Server(identity, clientCa)
    try test(server.port) finally server.close()

  "a server certificate" should {
    "be trusted through --ca-file's CA, and its IP address checked" in
      withServer(ca.issueServer(Seq("127.0.0.1", "localhost"))) { port =>
        assert(call(port, "127.0.0.1", Trust.Authorities(Seq(ca.certificate))).isEmpty)
      }
    "not be trusted by the system's store when a private CA signed it" in
      withServer(ca.issueServer(Seq("127.0.0.1"))) { port =>
        assert(call(port, "127.0.0.1", Trust.System).contains(FailureReason.ServerUntrusted))
      }
    "be refused when it names another host than the one called" in
      withServer(ca.issueServer(Seq("localhost"))) { port =>
        assert(call(port, "127.0.0.1", Trust.Authorities(Seq(ca.certificate))).contains(FailureReason.HostnameMismatch))
      }
    "be taken as it is with --insecure-tls" in
      withServer(CertificateAuthority.create("another").issueServer(Seq("elsewhere.example"))) { port =>
        assert(call(port, "127.0.0.1", Trust.Insecure).isEmpty)
      }
  }

  "--tls-version" should {
    "make devices offer only the versions it names" in
      withServer(ca.issueServer(Seq("127.0.0.1"))) { port =>
        def negotiated(choice: String): String =
          val context = TlsContexts.client(Trust.Authorities(Seq(ca.certificate)), None)
          val socket = context.getSocketFactory.createSocket().asInstanceOf[SSLSocket]
          try
            socket.setSSLParameters(TlsContexts.clientEngine(context, "127.0.0.1", port, verifyHostname = true,
              TlsSettings.versions(choice)).getSSLParameters)
            socket.connect(InetSocketAddress("127.0.0.1", port), 5000)
            socket.startHandshake()
            socket.getSession.getProtocol
          finally socket.close()
        assert(negotiated("any") == "TLSv1.3")
        assert(negotiated("1.2") == "TLSv1.2")
        assert(negotiated("1.3") == "TLSv1.3")
      }
  }

  "client certificates" should {
    "be admitted when the server's CA signed them, and refused when another did" in
      withServer(ca.issueServer(Seq("127.0.0.1")), clientCa = Some(ca.certificate)) { port =>
        val trust = Trust.Authorities(Seq(ca.certificate))
        assert(call(port, "127.0.0.1", trust, Some(ca.issueClient("02:00:00:00:00:01"))).isEmpty)
        val stranger = CertificateAuthority.create("stranger").issueClient("02:00:00:00:00:02")
        assert(call(port, "127.0.0.1", trust, Some(stranger)).contains(FailureReason.CertificateRejected))
        assert(call(port, "127.0.0.1", trust, None).contains(FailureReason.CertificateRejected))
      }
    "carry the device's name as subject CN, with the CA in the chain" in {
      val device = ca.issueClient("02:00:00:00:00:07")
      assert(device.subject == "CN=02:00:00:00:00:07")
      assert(device.chain.size == 2)
      device.chain.head.verify(ca.certificate.getPublicKey)
      assert(device.toString == "KeyMaterial(CN=02:00:00:00:00:07)") // never the key
    }
    "be issued from a CA the fleet reads back from its files" in {
      Pem.write(ca.material, dir.resolve("ca.pem"), Some(dir.resolve("ca.key")))
      assert(Files.getPosixFilePermissions(dir.resolve("ca.key")).asScala.map(_.toString) == Set("OWNER_READ", "OWNER_WRITE"))
      val loaded = CertificateAuthority.load(dir.resolve("ca.pem"), dir.resolve("ca.key"))
      loaded.issueClient("x").chain.head.verify(ca.certificate.getPublicKey)
    }
  }

  "files openssl wrote" should {
    def openssl(args: String*): Unit =
      val p = ProcessBuilder((Programs.openssl.toString +: args).asJava).directory(dir.toFile).redirectErrorStream(true).start()
      val out = String(p.getInputStream.readAllBytes())
      assert(p.waitFor(60, TimeUnit.SECONDS) && p.exitValue == 0, out)

    "be read: EC (SEC1), RSA (PKCS#1), PKCS#8 keys and PKCS#12 bundles" in {
      openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "ec.key")
      openssl("req", "-new", "-x509", "-key", "ec.key", "-subj", "/CN=ec-device", "-days", "1", "-out", "ec.pem")
      assert(Pem.keyMaterial(dir.resolve("ec.pem"), dir.resolve("ec.key")).subject == "CN=ec-device")
      openssl("genrsa", "-traditional", "-out", "rsa.key", "2048")
      openssl("req", "-new", "-x509", "-key", "rsa.key", "-subj", "/CN=rsa-device", "-days", "1", "-out", "rsa.pem")
      assert(Pem.keyMaterial(dir.resolve("rsa.pem"), dir.resolve("rsa.key")).key.getAlgorithm == "RSA")
      openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "p8.key")
      assert(Pem.privateKey(dir.resolve("p8.key")).getAlgorithm == "EC")
      openssl("pkcs12", "-export", "-inkey", "ec.key", "-in", "ec.pem", "-passout", "pass:secret", "-out", "ec.p12")
      assert(Pem.pkcs12(dir.resolve("ec.p12"), "secret".toCharArray).subject == "CN=ec-device")
    }
    "be refused in one line that names the file and says what to do" in {
      openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-aes256", "-pass", "pass:x", "-out", "locked.key")
      val locked = intercept[TlsFileError](Pem.privateKey(dir.resolve("locked.key")))
      assert(locked.getMessage.startsWith(s"${dir.resolve("locked.key")}: the key is encrypted; write it unencrypted"))
      val text = Files.writeString(dir.resolve("notes.pem"), "hello\n")
      assert(intercept[TlsFileError](Pem.certificates(text)).getMessage == s"$text: no certificate in it (expected PEM, -----BEGIN CERTIFICATE-----)")
      openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "other.key")
      val mismatch = intercept[TlsFileError](Pem.keyMaterial(dir.resolve("ec.pem"), dir.resolve("other.key")))
      assert(mismatch.getMessage == s"${dir.resolve("other.key")}: this key is not the one of the certificate in ${dir.resolve("ec.pem")}")
      Pem.write(ca.issueClient("leaf"), dir.resolve("leaf.pem"), Some(dir.resolve("leaf.key")))
      val notCa = intercept[TlsFileError](CertificateAuthority.load(dir.resolve("leaf.pem"), dir.resolve("leaf.key")))
      assert(notCa.getMessage.contains("not a CA certificate"))
      assert(!Seq(locked, mismatch, notCa).exists(_.getMessage.contains("\n")))
    }
  }
