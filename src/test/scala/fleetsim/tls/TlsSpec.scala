package fleetsim.tls

import com.typesafe.config.ConfigFactory
import fleetsim.e2e.{Programs, Stderr, withSystem}
import fleetsim.transport.{ConnectionMode, Dialer, FailureReason, HttpSettings, HttpTransport, MessageKind, Replies, Reply, Request}
import org.apache.pekko.actor.typed.ActorSystem
import org.bouncycastle.asn1.x500.X500Name
import org.bouncycastle.cert.jcajce.{JcaX509CertificateConverter, JcaX509v3CertificateBuilder}
import org.bouncycastle.operator.jcajce.JcaContentSignerBuilder
import org.scalatest.wordspec.AnyWordSpec

import java.math.BigInteger
import java.net.InetSocketAddress
import java.nio.file.{Files, Path}
import java.security.KeyPair
import java.security.cert.X509Certificate
import java.time.{Duration, Instant}
import java.util.Date
import java.util.concurrent.{CompletableFuture, TimeUnit}
import javax.net.ssl.{SSLServerSocket, SSLSocket}
import scala.concurrent.duration.*
import scala.concurrent.{Await, Future}
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
  private final class Server(identity: KeyMaterial, clientCa: Option[X509Certificate]):
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

  /** A certificate that `keys` signs for itself, valid from `from` to `to`. */
  private def selfSigned(keys: KeyPair, commonName: String, from: Instant, to: Instant): X509Certificate =
    val subject = X500Name(s"CN=$commonName")
    val signer = JcaContentSignerBuilder(if keys.getPrivate.getAlgorithm == "RSA" then "SHA256withRSA" else "SHA256withECDSA").build(keys.getPrivate)
    JcaX509CertificateConverter().getCertificate(
      JcaX509v3CertificateBuilder(subject, BigInteger.valueOf(System.nanoTime()), Date.from(from), Date.from(to), subject, keys.getPublic).build(signer))

  /** A server certificate for 127.0.0.1 that the test CA signed, valid from `from` to `to`. */
  private def signedFor127(from: Instant, to: Instant): KeyMaterial =
    val keys = CertificateAuthority.ecKeys()
    val signer = JcaContentSignerBuilder("SHA256withECDSA").build(ca.material.key)
    val builder = JcaX509v3CertificateBuilder(ca.certificate, BigInteger.valueOf(System.nanoTime()), Date.from(from), Date.from(to),
      X500Name("CN=127.0.0.1"), keys.getPublic)
    builder.addExtension(org.bouncycastle.asn1.x509.Extension.subjectAlternativeName, false,
      org.bouncycastle.asn1.x509.GeneralNames(org.bouncycastle.asn1.x509.GeneralName(org.bouncycastle.asn1.x509.GeneralName.iPAddress, "127.0.0.1")))
    KeyMaterial(keys.getPrivate, Seq(JcaX509CertificateConverter().getCertificate(builder.build(signer)), ca.certificate))

  private def withServer(identity: KeyMaterial, clientCa: Option[X509Certificate] = None)(test: Int => Unit): Unit =
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
    "be named expired when it is, not untrusted (what the run's start check says)" in
      withServer(signedFor127(Instant.now.minus(Duration.ofDays(10)), Instant.now.minus(Duration.ofDays(1)))) { port =>
        val refused = FleetTls.serverRefused("127.0.0.1", port, Trust.Authorities(Seq(ca.certificate)), timeoutMillis = 5000)
        assert(refused.exists((reason, words) => reason == FailureReason.ServerUntrusted && words.startsWith("it expired")), refused.toString)
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

  "a folder of device certificates (--client-certs)" should {
    val folder = Files.createDirectories(dir.resolve("devices"))
    def name(n: Int) = f"02:00:00:00:00:$n%02x"
    def file(n: Int, ext: String) = folder.resolve(s"${DeviceCertificates.fileName("{mac}", n, name(n))}.$ext")
    def issue(n: Int) = Pem.write(ca.issueClient(name(n)), file(n, "pem"), Some(file(n, "key")))
    /** A certificate for `n` valid only from `from` to `to` (a CA issues for now). */
    def dated(n: Int, from: Instant, to: Instant): Unit =
      val keys = CertificateAuthority.ecKeys()
      Pem.write(KeyMaterial(keys.getPrivate, Seq(selfSigned(keys, name(n), from, to))), file(n, "pem"), Some(file(n, "key")))
    val now = Instant.now
    Seq(0, 1, 4, 5, 9).foreach(issue)
    issue(3); Files.delete(file(3, "key"))
    Files.copy(file(0, "key"), file(4, "key"), java.nio.file.StandardCopyOption.REPLACE_EXISTING) // device 0's key: not device 4's pair
    val pem = Files.readString(file(5, "pem"))
    Files.writeString(file(5, "pem"), pem.substring(0, pem.length / 2) + "!!" + pem.substring(pem.length / 2)) // corrupt in the middle
    dated(6, now.minus(Duration.ofDays(30)), now.minus(Duration.ofDays(1)))
    dated(7, now.plus(Duration.ofDays(1)), now.plus(Duration.ofDays(30)))
    Files.writeString(file(8, "pem"), "hello\n"); Files.copy(file(0, "key"), file(8, "key"))

    "say of each device's files why they cannot be used, naming the file" in {
      def fault(n: Int) =
        val e = intercept[TlsFileError](DeviceCertificates.read(folder, DeviceCertificates.fileName("{mac}", n, name(n)), now))
        assert(!e.getMessage.contains("\n"))
        e.file.get.getFileName.toString -> e.why
      assert(DeviceCertificates.read(folder, DeviceCertificates.fileName("{mac}", 0, name(0)), now).subject == s"CN=${name(0)}")
      assert(fault(2) == ("02-00-00-00-00-02.pem" -> "missing"))
      assert(fault(3) == ("02-00-00-00-00-03.key" -> "missing"))
      assert(fault(4) == ("02-00-00-00-00-04.key" -> "key does not match certificate"))
      assert(fault(5) == ("02-00-00-00-00-05.pem" -> "not PEM"))
      assert(fault(6)._1 == "02-00-00-00-00-06.pem" && fault(6)._2.startsWith("certificate expired "))
      assert(fault(7)._1 == "02-00-00-00-00-07.pem" && fault(7)._2.startsWith("certificate not valid until "))
      assert(fault(8) == ("02-00-00-00-00-08.pem" -> "not PEM: no certificate in it"))
    }

    "be checked for every device a run has, refused in one line that counts them, names the first and says what to do" in {
      val checked = DeviceCertificates.check(folder, "{mac}", 12, name, now)
      assert(checked.unusable == 9) // 2 to 8, 10 and 11
      assert(checked.first.map(_.device) == Seq(2, 3, 4))
      val line = DeviceCertificates.refusal(folder, "{mac}", 12, checked).get
      assert(line.startsWith(s"--client-certs $folder: 9 of 12 devices have no usable certificate: device 2 (02-00-00-00-00-02.pem: missing), " +
        "device 3 (02-00-00-00-00-03.key: missing), device 4 (02-00-00-00-00-04.key: key does not match certificate), and 6 more; " +
        "give devices 0..11 each a NAME.pem with NAME.key, or a NAME.p12"), line)
      assert(line.endsWith("or run fewer devices (--devices 2), or use --client-ca and --client-ca-key to issue them at start"), line)
      assert(!line.contains("\n"))
      assert(DeviceCertificates.refusal(folder, "{mac}", 2, DeviceCertificates.check(folder, "{mac}", 2, name, now)).isEmpty)
      assert(intercept[TlsFileError](DeviceCertificates.checkFolder(folder, "{mac}", 3, name)).getMessage.contains("1 of 3 devices"))
    }

    "match a key to its certificate by public key, EC and RSA alike" in {
      val ec = ca.issueClient("a")
      assert(Pem.matches(ec.key, ec.chain.head))
      assert(!Pem.matches(ca.issueClient("b").key, ec.chain.head))
      val rsa = java.security.KeyPairGenerator.getInstance("RSA")
      rsa.initialize(2048)
      val (one, two) = (rsa.generateKeyPair(), rsa.generateKeyPair())
      val cert = selfSigned(one, "rsa", now, now.plus(Duration.ofDays(1)))
      assert(Pem.matches(one.getPrivate, cert))
      assert(!Pem.matches(two.getPrivate, cert))
      assert(!Pem.matches(ec.key, cert))
    }
  }

  "a device whose certificate cannot be had" should {
    "fail each of its calls as certificateUnusable, without a stack trace, never as overloaded" in {
      val config = ConfigFactory.load()
      var replies = Seq.empty[Reply]
      val (log, _) = Stderr.during {
        withSystem(config) {
          given scala.concurrent.ExecutionContext = summon[ActorSystem[?]].executionContext
          // Failed already: the connection it would have ends before its call is placed, the
          // likeliest way to run into the transport's own bookkeeping.
          val none: DeviceCertificates = (n, _) => Future.failed(TlsFileError(s"device $n has none", None, "missing"))
          val tls = FleetTls("127.0.0.1", 9, Trust.Insecure, Some(none), n => s"device-$n", TlsSettings.versions("any"))
          val settings = HttpSettings(config)
          val http = HttpTransport("127.0.0.1", 9, Dialer("127.0.0.1", 9, settings, Some(tls), None), ConnectionMode.PerDevice, settings, 200, 1)
          val join = Request(MessageKind("join", 0, periodic = false), "POST", "/join", Array.emptyByteArray, Array.emptyByteArray)
          replies = Await.result(Future.sequence((0 until 200).flatMap(d => Seq.fill(3)(http.send(d, join)))), 30.seconds)
          Await.result(http.close(), 10.seconds)
        }
      }
      val counted = replies.groupBy(identity).view.mapValues(_.size).toMap
      assert(counted == Map(Reply.Failed(FailureReason.CertificateUnusable) -> 600), counted)
      assert(log.contains("has no usable client certificate (device ") && !log.contains("\tat ") && !log.contains("Recursive update"), log)
    }
  }
