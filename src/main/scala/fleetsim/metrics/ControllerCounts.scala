package fleetsim.metrics

/** What the reference controller says it saw, as outputs read it (summary.json's `controller`,
  * `fleetsim_controller_*` on /metrics): a type of their own, so no output imports the controller.
  * Its tallies by message kind: `received` counts calls answered 200, `tunnelled` the
  * part of those that came through an SSH tunnel. `addressChanges` counts protocol v1 calls that came
  * from another address than the same device's call before; `connections` the HTTP(S) connections
  * accepted; `clientSubjects` the distinct client-certificate subjects seen (--client-certs-required);
  * `duplicates` the protocol v1 heartbeats that came from a second device with the same MAC.
  */
final case class ControllerCounts(
    registered: Int,
    forbidden: Int,
    configSeq: Long,
    received: Map[String, Long],
    tunnelled: Map[String, Long],
    refused: Map[String, Long],
    injectedErrors: Map[String, Long],
    forwardsRefused: Long,
    addressChanges: Long,
    connections: Long,
    clientSubjects: Int,
    sshSessions: Int = 0,
    duplicates: Long = 0)
