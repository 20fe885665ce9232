package fleetsim.e2e

import org.scalatest.Assertions.assert

/** The fleet's counts agree with what the server received, kind by kind: every message the fleet
  * counted delivered arrived, and every one that arrived the fleet counted, delivered or failed (a
  * call that timed out on a busy machine may still have been served). `unreported`: how many more
  * may have arrived uncounted, where part of the fleet was killed before it could report them.
  */
def reconciles(messages: Map[String, fleetsim.report.MessageCounts], received: Map[String, Long], unreported: Long = 0): Unit =
  for (kind, m) <- messages do
    assert(m.ok <= received(kind) && received(kind) <= m.ok + m.failed + unreported,
      s"$kind: ${m.ok} delivered, ${m.failed} failed (${m.failures}), ${received(kind)} received")
