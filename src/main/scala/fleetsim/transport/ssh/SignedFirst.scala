package fleetsim.transport.ssh

import org.apache.sshd.client.auth.pubkey.{KeyPairIdentity, UserAuthPublicKey, UserAuthPublicKeyFactory}
import org.apache.sshd.client.session.ClientSession
import org.apache.sshd.common.SshConstants
import org.apache.sshd.common.config.keys.KeyUtils
import org.apache.sshd.common.kex.extension.DefaultClientKexExtensionHandler
import org.apache.sshd.common.kex.extension.parser.HostBoundPubkeyAuthentication
import org.apache.sshd.common.keyprovider.KeyPairProvider

import java.security.KeyPair

/** Public-key authentication with the devices' key, signed in its first request, as RFC 4252 §7
  * allows. MINA's own first asks whether the server would take the key, then signs: a round trip
  * more, and a key the server decodes and checks twice, for every handshake of the fleet.
  *
  * Only for keys whose type is their signature algorithm (Ed25519, ECDSA). An RSA key's algorithm
  * is the server's to choose (rsa-sha2-512, rsa-sha2-256, ssh-rsa): MINA's own asks then.
  */
final class SignedFirst(deviceKeys: KeyPair) extends UserAuthPublicKeyFactory:
  private val publicKey = deviceKeys.getPublic
  private val algorithm = KeyUtils.getKeyType(publicKey) // the key's type is its signature algorithm

  override def createUserAuth(session: ClientSession): UserAuthPublicKey =
    if algorithm == KeyPairProvider.SSH_RSA then super.createUserAuth(session) else Auth()

  private final class Auth extends UserAuthPublicKey(getSignatureFactories):
    private var sent = false

    /** The signed request, once: refused, the client goes on to its next method (a password). */
    override protected def sendAuthDataRequest(session: ClientSession, service: String): Boolean =
      if sent then false
      else
        sent = true
        // OpenSSH 8.9 and later ask the signature to name their host key too (publickey-hostbound).
        val hostBound = session.getAttribute(DefaultClientKexExtensionHandler.HOSTBOUND_AUTHENTICATION) == Integer.valueOf(0)
        val method = if hostBound then HostBoundPubkeyAuthentication.AUTH_NAME else getName
        val hostKey = if hostBound then session.getServerKey else null
        current = KeyPairIdentity(this, session, deviceKeys)
        chosenAlgorithm = algorithm
        val request = session.createBuffer(SshConstants.SSH_MSG_USERAUTH_REQUEST)
        val user = session.getUsername
        request.putString(user)
        request.putString(service)
        request.putString(method)
        request.putBoolean(true) // signed
        request.putString(algorithm)
        request.putPublicKey(publicKey)
        if hostKey != null then request.putPublicKey(hostKey)
        appendSignature(session, service, method, user, algorithm, publicKey, hostKey, request)
        setCancellable(false)
        session.writePacket(request)
        true
