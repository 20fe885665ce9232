package fleetsim.tls

import org.bouncycastle.asn1.ASN1ObjectIdentifier
import org.bouncycastle.asn1.edec.EdECObjectIdentifiers
import org.bouncycastle.asn1.pkcs.{PKCSObjectIdentifiers, PrivateKeyInfo}
import org.bouncycastle.asn1.x509.SubjectPublicKeyInfo
import org.bouncycastle.asn1.x9.{ECNamedCurveTable, X9ECParameters, X9ObjectIdentifiers}
import org.bouncycastle.cert.X509CertificateHolder
import org.bouncycastle.cert.jcajce.JcaX509CertificateConverter
import org.bouncycastle.crypto.ec.CustomNamedCurves
import org.bouncycastle.math.ec.FixedPointCombMultiplier
import org.bouncycastle.openssl.jcajce.{JcaPEMWriter, JcaPKCS8Generator}
import org.bouncycastle.openssl.{PEMEncryptedKeyPair, PEMKeyPair, PEMParser}
import org.bouncycastle.pkcs.PKCS8EncryptedPrivateKeyInfo

import java.nio.file.attribute.PosixFilePermissions
import java.nio.file.{Files, Path}
import java.security.cert.X509Certificate
import java.security.spec.PKCS8EncodedKeySpec
import java.security.interfaces.{ECPrivateKey, ECPublicKey, RSAPrivateCrtKey, RSAPublicKey}
import java.security.{KeyFactory, KeyStore, PrivateKey, Signature}
import scala.jdk.CollectionConverters.*

/** A certificate chain and its private key, as one device or server presents it. */
final case class KeyMaterial(key: PrivateKey, chain: Seq[X509Certificate]):
  /** The leaf's subject, like `CN=02:00:00:00:00:01`. */
  def subject: String = chain.head.getSubjectX500Principal.getName

  override def toString: String = s"KeyMaterial($subject)" // never the key

/** A user mistake in a TLS file: one line naming the file, what is wrong and how to fix it.
  *
  * @param file the file at fault
  * @param why what is wrong in a few words, without the file or the fix (`not PEM`, `key does not
  *            match certificate`): what a list of many devices' files says of each
  */
final class TlsFileError(message: String, val file: Option[Path], val why: String) extends RuntimeException(message):
  def this(message: String) = this(message, None, message)

/** Certificates and keys in the files users have: PEM (as openssl writes them) and PKCS#12. */
object Pem:
  def certificates(path: Path): Seq[X509Certificate] =
    val certs = pem(path)(read(path).collect { case holder: X509CertificateHolder => JcaX509CertificateConverter().getCertificate(holder) })
    if certs.isEmpty then
      throw TlsFileError(s"$path: no certificate in it (expected PEM, -----BEGIN CERTIFICATE-----)", Some(path), "not PEM: no certificate in it")
    certs

  /** PKCS#8 (`PRIVATE KEY`), PKCS#1 RSA (`RSA PRIVATE KEY`) or SEC1 EC (`EC PRIVATE KEY`); not encrypted. */
  def privateKey(path: Path): PrivateKey =
    pem(path)(read(path).collectFirst {
      case pair: PEMKeyPair => decode(path, pair.getPrivateKeyInfo)
      case info: PrivateKeyInfo => decode(path, info)
      case _: PEMEncryptedKeyPair | _: PKCS8EncryptedPrivateKeyInfo =>
        throw TlsFileError(s"$path: the key is encrypted; write it unencrypted (openssl pkey -in $path -out plain.key) and keep that file private",
          Some(path), "the key is encrypted")
    }).getOrElse(throw TlsFileError(s"$path: no private key in it (expected PEM, -----BEGIN PRIVATE KEY-----)", Some(path), "not PEM: no private key in it"))

  /** With the JDK's own key factories: BouncyCastle's converter names EC keys "ECDSA", which only
    * its own provider knows, and fleetsim does not install it.
    */
  private def decode(path: Path, info: PrivateKeyInfo): PrivateKey =
    val algorithm = info.getPrivateKeyAlgorithm.getAlgorithm match
      case X9ObjectIdentifiers.id_ecPublicKey => "EC"
      case PKCSObjectIdentifiers.rsaEncryption => "RSA"
      case EdECObjectIdentifiers.id_Ed25519 => "Ed25519"
      case other =>
        throw TlsFileError(s"$path: a key of type $other, which fleetsim does not read: use an EC or RSA key", Some(path), s"a key of type $other, not EC or RSA")
    KeyFactory.getInstance(algorithm).generatePrivate(PKCS8EncodedKeySpec(info.getEncoded))

  /** A certificate (and the rest of its chain) from `cert`, its key from `key`: they must match. */
  def keyMaterial(cert: Path, key: Path): KeyMaterial =
    val material = KeyMaterial(privateKey(key), certificates(cert))
    if !matches(material.key, material.chain.head) then
      throw TlsFileError(s"$key: this key is not the one of the certificate in $cert", Some(key), "key does not match certificate")
    material

  /** The first key entry of a PKCS#12 file; its key must match its certificate. */
  def pkcs12(path: Path, password: Array[Char]): KeyMaterial =
    val store = KeyStore.getInstance("PKCS12")
    if !Files.isReadable(path) then throw TlsFileError(s"$path: cannot read it", Some(path), if Files.exists(path) then "unreadable" else "missing")
    try
      val in = Files.newInputStream(path)
      try store.load(in, password) finally in.close()
    catch case e: Exception =>
      throw TlsFileError(s"$path: not a PKCS#12 file this password opens (${e.getMessage}); the password comes from FLEETSIM_CLIENT_CERTS_PASSWORD",
        Some(path), "not PKCS#12, or not opened by FLEETSIM_CLIENT_CERTS_PASSWORD")
    val material = store.aliases.asScala.find(store.isKeyEntry).map { alias =>
      KeyMaterial(store.getKey(alias, password).asInstanceOf[PrivateKey], store.getCertificateChain(alias).toSeq.map(_.asInstanceOf[X509Certificate]))
    }.getOrElse(throw TlsFileError(s"$path: no private key in it", Some(path), "no private key in it"))
    if !matches(material.key, material.chain.head) then
      throw TlsFileError(s"$path: its key is not the one of its certificate", Some(path), "key does not match certificate")
    material

  /** Writes the chain; the key, if `key` is given, to its own file readable by its owner only. */
  def write(material: KeyMaterial, cert: Path, key: Option[Path]): Unit =
    writeObjects(cert, material.chain)
    for file <- key do
      Files.deleteIfExists(file)
      Files.createFile(file, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")))
      writeObjects(file, Seq(JcaPKCS8Generator(material.key, null))) // PKCS#8: what openssl writes today

  private def writeObjects(path: Path, objects: Seq[AnyRef]): Unit =
    Option(path.toAbsolutePath.getParent).foreach(Files.createDirectories(_))
    val writer = JcaPEMWriter(Files.newBufferedWriter(path))
    try objects.foreach(writer.writeObject) finally writer.close()

  /** Whether `key` is the private half of the certificate's public key: the public key it implies
    * compared with the certificate's (RSA: modulus and exponent; EC: d·G, 75 µs where signing and
    * verifying took 1.6 ms, which a check of 100,000 devices' files feels); other keys (Ed25519)
    * sign and are verified.
    */
  private[tls] def matches(key: PrivateKey, cert: X509Certificate): Boolean =
    try
      (key, cert.getPublicKey) match
        case (k: RSAPrivateCrtKey, p: RSAPublicKey) => k.getModulus == p.getModulus && k.getPublicExponent == p.getPublicExponent
        case (k: ECPrivateKey, p: ECPublicKey) =>
          curve(p) match
            case Some(named) =>
              val q = FixedPointCombMultiplier().multiply(named.getG, k.getS).normalize()
              q.getAffineXCoord.toBigInteger == p.getW.getAffineX && q.getAffineYCoord.toBigInteger == p.getW.getAffineY
            case None => signs(key, cert)
        case _ => signs(key, cert)
    catch case _: Exception => false

  /** A named curve's parameters, held once each: their generator keeps the multiplier's precomputed table. */
  private def curve(key: ECPublicKey): Option[X9ECParameters] =
    SubjectPublicKeyInfo.getInstance(key.getEncoded).getAlgorithm.getParameters match
      case oid: ASN1ObjectIdentifier => Option(CustomNamedCurves.getByOID(oid)).orElse(Option(ECNamedCurveTable.getByOID(oid)))
      case _ => None // explicit parameters

  private def signs(key: PrivateKey, cert: X509Certificate): Boolean =
    val algorithm = key.getAlgorithm match
      case "RSA" => "SHA256withRSA"
      case "EC" => "SHA256withECDSA"
      case other => other // Ed25519
    val sign = Signature.getInstance(algorithm)
    sign.initSign(key)
    sign.update(Array[Byte](1, 2, 3))
    val verify = Signature.getInstance(algorithm)
    verify.initVerify(cert.getPublicKey)
    verify.update(Array[Byte](1, 2, 3))
    verify.verify(sign.sign())

  private def read(path: Path): Seq[AnyRef] =
    if !Files.isReadable(path) then throw TlsFileError(s"$path: cannot read it", Some(path), if Files.exists(path) then "unreadable" else "missing")
    val parser = PEMParser(Files.newBufferedReader(path))
    try Iterator.continually(parser.readObject()).takeWhile(_ != null).toSeq
    finally parser.close()

  /** What `path` holds, or why it is no PEM a reader could use: bytes that are not text, base64
    * that does not decode, DER that is no certificate or key.
    */
  private def pem[A](path: Path)(body: => A): A =
    try body
    catch
      case e: TlsFileError => throw e
      case e: Exception => throw TlsFileError(s"$path: not a PEM file (${Option(e.getMessage).getOrElse(e.getClass.getSimpleName)})", Some(path), "not PEM")
