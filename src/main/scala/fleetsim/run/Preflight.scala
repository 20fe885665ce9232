package fleetsim.run

import fleetsim.{UsageError, CannotRun}

import fleetsim.fleet.{DescriptorBudget, HeapBudget}
import fleetsim.metrics.ProcessWatch

import fleetsim.tls.{CertificateAuthority, DeviceCertificates, FleetTls}
import fleetsim.transport.FailureReason

import java.io.IOException
import java.net.{InetSocketAddress, Socket, URI}

/** What would make every device fail the same way, found once before any device starts: one line
  * that says what to do beats a million identical failures.
  */
object Preflight:
  def check(settings: RunSettings): Unit =
    val kind = settings.transport
    kind.preflight()
    val (files, filesName) = openFiles(settings)
    DescriptorBudget.check(settings.connections, settings.sessions, settings.embedded, files, sessionKind(settings), filesName, kind.server,
      shared = settings.connection == fleetsim.transport.ConnectionMode.Shared)
      .left.foreach(m => throw CannotRun(m))
    HeapBudget.check(settings.fleet.devices, heapPerDevice(settings), Runtime.getRuntime.maxMemory).left.foreach(m => throw CannotRun(m))
    for url <- settings.controllerUrl if url.startsWith("https://") && !settings.tls.insecure do serverTrusted(settings, URI(url))
    // A CA or certificate folder that cannot be read fails here, in one line, not in every device.
    for file <- settings.tls.caFile do fleetsim.tls.Pem.certificates(file)
    for (cert, key) <- settings.tls.clientCa.zip(settings.tls.clientCaKey) do CertificateAuthority.load(cert, key)
    for dir <- settings.tls.clientCerts do // every device's files, not device 0's: one missing fails that device all run long
      DeviceCertificates.checkFolder(dir, settings.tls.clientCertsName, settings.fleet.devices, settings.profile.identityName)
    for addresses <- settings.sourceIps; address <- addresses.samples.take(64) do
      val socket = Socket()
      try socket.bind(InetSocketAddress(address, 0))
      catch case e: IOException =>
        throw UsageError(s"--source-ips: cannot call from ${address.getHostAddress} (${e.getMessage}): give addresses this machine has (on loopback, any 127.x.y.z)", "run")
      finally socket.close()

  /** The live heap a device of this run takes: its transport's, over TLS or not, on a connection of its own or shared. */
  def heapPerDevice(settings: RunSettings): Long =
    val kind = settings.transport
    val tls = settings.controllerUrl.exists(_.startsWith("https://")) || kind.serverTls(settings) || (settings.embedded && settings.controller.tls)
    kind.heapPerDevice(tls, settings.connection != fleetsim.transport.ConnectionMode.Shared)

  /** A run over a cluster: the nodes check their shares; this process holds the embedded
    * controller's (or broker's) end of every session.
    */
  def checkRunner(settings: RunSettings): Unit =
    if settings.embedded then
      val (files, filesName) = openFiles(settings)
      DescriptorBudget.checkServer(settings.connections, settings.sessions, sessionKind(settings), files, filesName, settings.transport.server)
        .left.foreach(m => throw CannotRun(m))

  /** The results folder is made now, where the run is started: a run that cannot write its results must not start. */
  def resultsFolder(settings: RunSettings): Unit =
    val dir = settings.resultsDir
    try
      java.nio.file.Files.createDirectories(dir)
      if !java.nio.file.Files.isWritable(dir) then throw IOException("not writable")
    catch case e: IOException =>
      val why = e match
        case _: java.nio.file.FileAlreadyExistsException => "a file of that name is in the way"
        case _: java.nio.file.NoSuchFileException => s"${e.getMessage} does not exist and cannot be made"
        case _ => Option(e.getMessage).getOrElse(e.getClass.getSimpleName)
      throw UsageError(s"--results: cannot make folder $dir ($why): name a folder you may write to", "run")

  private def openFiles(settings: RunSettings) = DescriptorBudget.limit(ProcessWatch.openFileLimit, settings.fleet.maxOpenFiles)

  private def sessionKind(settings: RunSettings) = settings.transport.sessions.getOrElse("sessions")

  /** An untrusted server certificate, or one for another name, would fail every device forever. */
  private def serverTrusted(settings: RunSettings, url: URI): Unit =
    val port = if url.getPort < 0 then 443 else url.getPort
    FleetTls.serverRefused(url.getHost, port, FleetTls.trust(settings.tls, None), timeoutMillis = 5000).foreach {
      case (FailureReason.HostnameMismatch, words) =>
        throw UsageError(s"the controller's certificate does not name ${url.getHost} ($words): call it by a name or address its certificate has, or pass --insecure-tls to skip the check", "run")
      case (_, words) if FleetTls.outOfDates(words) =>
        throw UsageError(s"the controller's certificate at $url is out of its dates ($words): renew it (or set the clock right), or pass --insecure-tls to skip the check", "run")
      case (_, words) =>
        val trusted = settings.tls.caFile.fold("the system's trust store")(f => s"the CAs in $f")
        throw UsageError(s"the controller's certificate at $url is not signed by $trusted ($words): pass --ca-file with the CA that signed it, or --insecure-tls to skip the check", "run")
    }
