package fleetsim.tls

import org.bouncycastle.asn1.edec.EdECObjectIdentifiers
import org.bouncycastle.asn1.pkcs.{PKCSObjectIdentifiers, PrivateKeyInfo}
import org.bouncycastle.asn1.x9.X9ObjectIdentifiers
import org.bouncycastle.cert.X509CertificateHolder
import org.bouncycastle.cert.jcajce.JcaX509CertificateConverter
import org.bouncycastle.openssl.jcajce.{JcaPEMWriter, JcaPKCS8Generator}
import org.bouncycastle.openssl.{PEMEncryptedKeyPair, PEMKeyPair, PEMParser}
import org.bouncycastle.pkcs.PKCS8EncryptedPrivateKeyInfo

import java.io.IOException
import java.nio.file.attribute.PosixFilePermissions
import java.nio.file.{Files, Path}
import java.security.cert.X509Certificate
import java.security.spec.PKCS8EncodedKeySpec
import java.security.{KeyFactory, KeyStore, PrivateKey, Signature}
import scala.jdk.CollectionConverters.*

/** A certificate chain and its private key, as one device or server presents it. */
final case class KeyMaterial(key: PrivateKey, chain: Seq[X509Certificate]):
  /** The leaf's subject, like `CN=02:00:00:00:00:01`. */
  def subject: String = chain.head.getSubjectX500Principal.getName

  override def toString: String = s"KeyMaterial($subject)" // never the key

/** A user mistake in a TLS file: one line naming the file, what is wrong and how to fix it. */
final class TlsFileError(message: String) extends RuntimeException(message)

/** Certificates and keys in the files users have: PEM (as openssl writes them) and PKCS#12. */
object Pem:
  def certificates(path: Path): Seq[X509Certificate] =
    val certs = read(path).collect { case holder: X509CertificateHolder => JcaX509CertificateConverter().getCertificate(holder) }
    if certs.isEmpty then throw TlsFileError(s"$path: no certificate in it (expected PEM, -----BEGIN CERTIFICATE-----)")
    certs

  /** PKCS#8 (`PRIVATE KEY`), PKCS#1 RSA (`RSA PRIVATE KEY`) or SEC1 EC (`EC PRIVATE KEY`); not encrypted. */
  def privateKey(path: Path): PrivateKey =
    read(path).collectFirst {
      case pair: PEMKeyPair => decode(pair.getPrivateKeyInfo)
      case info: PrivateKeyInfo => decode(info)
      case _: PEMEncryptedKeyPair | _: PKCS8EncryptedPrivateKeyInfo =>
        throw TlsFileError(s"$path: the key is encrypted; write it unencrypted (openssl pkey -in $path -out plain.key) and keep that file private")
    }.getOrElse(throw TlsFileError(s"$path: no private key in it (expected PEM, -----BEGIN PRIVATE KEY-----)"))

  /** With the JDK's own key factories: BouncyCastle's converter names EC keys "ECDSA", which only
    * its own provider knows, and fleetsim does not install it.
    */
  private def decode(info: PrivateKeyInfo): PrivateKey =
    val algorithm = info.getPrivateKeyAlgorithm.getAlgorithm match
      case X9ObjectIdentifiers.id_ecPublicKey => "EC"
      case PKCSObjectIdentifiers.rsaEncryption => "RSA"
      case EdECObjectIdentifiers.id_Ed25519 => "Ed25519"
      case other => throw TlsFileError(s"a key of type $other, which fleetsim does not read: use an EC or RSA key")
    KeyFactory.getInstance(algorithm).generatePrivate(PKCS8EncodedKeySpec(info.getEncoded))

  /** A certificate (and the rest of its chain) from `cert`, its key from `key`: they must match. */
  def keyMaterial(cert: Path, key: Path): KeyMaterial =
    val material = KeyMaterial(privateKey(key), certificates(cert))
    if !matches(material.key, material.chain.head) then throw TlsFileError(s"$key: this key is not the one of the certificate in $cert")
    material

  /** The first key entry of a PKCS#12 file. */
  def pkcs12(path: Path, password: Array[Char]): KeyMaterial =
    val store = KeyStore.getInstance("PKCS12")
    try
      val in = Files.newInputStream(path)
      try store.load(in, password) finally in.close()
    catch case e: Exception => throw TlsFileError(s"$path: not a PKCS#12 file this password opens (${e.getMessage}); the password comes from FLEETSIM_CLIENT_CERTS_PASSWORD")
    store.aliases.asScala.find(store.isKeyEntry).map { alias =>
      KeyMaterial(store.getKey(alias, password).asInstanceOf[PrivateKey], store.getCertificateChain(alias).toSeq.map(_.asInstanceOf[X509Certificate]))
    }.getOrElse(throw TlsFileError(s"$path: no private key in it"))

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

  /** Whether `key` signs what the certificate's public key verifies. */
  private[tls] def matches(key: PrivateKey, cert: X509Certificate): Boolean =
    try
      val algorithm = if key.getAlgorithm == "RSA" then "SHA256withRSA" else "SHA256withECDSA"
      val sign = Signature.getInstance(algorithm)
      sign.initSign(key)
      sign.update(Array[Byte](1, 2, 3))
      val verify = Signature.getInstance(algorithm)
      verify.initVerify(cert.getPublicKey)
      verify.update(Array[Byte](1, 2, 3))
      verify.verify(sign.sign())
    catch case _: Exception => false

  private def read(path: Path): Seq[AnyRef] =
    if !Files.isReadable(path) then throw TlsFileError(s"$path: cannot read it")
    val parser = PEMParser(Files.newBufferedReader(path))
    try Iterator.continually(parser.readObject()).takeWhile(_ != null).toSeq
    catch case e: IOException => throw TlsFileError(s"$path: not a PEM file (${e.getMessage})")
    finally parser.close()
