package fleetsim.tls

import org.bouncycastle.asn1.x500.X500NameBuilder
import org.bouncycastle.asn1.x500.style.BCStyle
import org.bouncycastle.asn1.x509.*
import org.bouncycastle.cert.jcajce.{JcaX509CertificateConverter, JcaX509ExtensionUtils, JcaX509v3CertificateBuilder}
import org.bouncycastle.operator.jcajce.JcaContentSignerBuilder

import java.math.BigInteger
import java.net.InetAddress
import java.nio.file.Path
import java.security.cert.X509Certificate
import java.security.spec.ECGenParameterSpec
import java.security.{KeyPair, KeyPairGenerator, PrivateKey, SecureRandom}
import java.time.{Duration, Instant}
import java.util.Date

/** A CA that issues servers and devices their certificates: EC P-256 keys, signed with its own key. */
final class CertificateAuthority(val certificate: X509Certificate, key: PrivateKey):
  private val signature = if key.getAlgorithm == "RSA" then "SHA256withRSA" else "SHA256withECDSA"

  /** A server certificate for `names`: IP addresses as IP SANs, the rest as DNS names. */
  def issueServer(names: Seq[String]): KeyMaterial =
    val sans = names.distinct.map(n => if CertificateAuthority.isAddress(n) then GeneralName(GeneralName.iPAddress, n) else GeneralName(GeneralName.dNSName, n))
    issue(names.head, KeyPurposeId.id_kp_serverAuth, sans)

  /** A device's client certificate, subject CN = `commonName`. */
  def issueClient(commonName: String): KeyMaterial = issue(commonName, KeyPurposeId.id_kp_clientAuth, Nil)

  private def issue(commonName: String, purpose: KeyPurposeId, sans: Seq[GeneralName]): KeyMaterial =
    val pair = CertificateAuthority.ecKeys()
    val now = Instant.now
    val builder = JcaX509v3CertificateBuilder(certificate, CertificateAuthority.serial(), Date.from(now.minus(Duration.ofHours(1))),
      Date.from(now.plus(Duration.ofDays(825))), CertificateAuthority.name(commonName), pair.getPublic)
    val extensions = JcaX509ExtensionUtils()
    builder.addExtension(Extension.basicConstraints, true, BasicConstraints(false))
    builder.addExtension(Extension.keyUsage, true, KeyUsage(KeyUsage.digitalSignature))
    builder.addExtension(Extension.extendedKeyUsage, false, ExtendedKeyUsage(purpose))
    builder.addExtension(Extension.authorityKeyIdentifier, false, extensions.createAuthorityKeyIdentifier(certificate))
    if sans.nonEmpty then builder.addExtension(Extension.subjectAlternativeName, false, GeneralNames(sans.toArray))
    val leaf = JcaX509CertificateConverter().getCertificate(builder.build(JcaContentSignerBuilder(signature).build(key)))
    KeyMaterial(pair.getPrivate, Seq(leaf, certificate))

  /** The CA's own certificate and key, to write to its files. */
  def material: KeyMaterial = KeyMaterial(key, Seq(certificate))

object CertificateAuthority:
  /** A new self-signed CA, valid for ten years. */
  def create(commonName: String): CertificateAuthority =
    val pair = ecKeys()
    val now = Instant.now
    val subject = name(commonName)
    val builder = JcaX509v3CertificateBuilder(subject, serial(), Date.from(now.minus(Duration.ofHours(1))),
      Date.from(now.plus(Duration.ofDays(3650))), subject, pair.getPublic)
    builder.addExtension(Extension.basicConstraints, true, BasicConstraints(true))
    builder.addExtension(Extension.keyUsage, true, KeyUsage(KeyUsage.keyCertSign | KeyUsage.cRLSign))
    builder.addExtension(Extension.subjectKeyIdentifier, false, JcaX509ExtensionUtils().createSubjectKeyIdentifier(pair.getPublic))
    val cert = JcaX509CertificateConverter().getCertificate(builder.build(JcaContentSignerBuilder("SHA256withECDSA").build(pair.getPrivate)))
    CertificateAuthority(cert, pair.getPrivate)

  /** A CA from its certificate and key files (PEM). */
  def load(cert: Path, key: Path): CertificateAuthority =
    val material = Pem.keyMaterial(cert, key)
    if material.chain.head.getBasicConstraints < 0 then
      throw TlsFileError(s"$cert: not a CA certificate (no basicConstraints CA:TRUE), so it cannot sign device certificates")
    CertificateAuthority(material.chain.head, material.key)

  private val random = SecureRandom()

  private[tls] def ecKeys(): KeyPair =
    val generator = KeyPairGenerator.getInstance("EC")
    generator.initialize(ECGenParameterSpec("secp256r1"), random)
    generator.generateKeyPair()

  private def serial(): BigInteger = BigInteger(63, random).add(BigInteger.ONE)

  private def name(commonName: String) = X500NameBuilder(BCStyle.INSTANCE).addRDN(BCStyle.CN, commonName).build()

  private[tls] def isAddress(name: String): Boolean =
    name.nonEmpty && (name.contains(':') || name.forall(c => c.isDigit || c == '.')) &&
      scala.util.Try(InetAddress.getByName(name)).isSuccess
