package fleetsim.run

import com.typesafe.config.Config
import fleetsim.profile.{HttpSection, ProfileSection}

/** Devices that call the controller over the fleet's HTTP(S) connections, and hold no session of their own. */
final class HttpKind extends TransportKind:
  def entry: TransportKinds.Entry = HttpKind

  /** On shared plain connections under 1 KB; a connection of its own costs a device the stream
    * stages, and with TLS its engine and keys (21 KB measured at 10,000 devices: ADR 0013).
    */
  def heapPerDevice(tls: Boolean, ownConnection: Boolean): Long =
    if !ownConnection then 1_000 else if tls then 30_000 else 20_000

  /** Over plain HTTP the devices run on their connections' loops (ADR 0016). */
  def parts(made: FleetParts.Making): TransportKind.Parts =
    val controller = made.controller
    TransportKind.Parts(controller, io = controller.io)

object HttpKind extends TransportKinds.Entry("http", defaultProfile = "ap-v1", help = ""):
  def profileSection: ProfileSection = HttpSection
  def read(config: Config): TransportKind = HttpKind()
