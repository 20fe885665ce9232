package fleetsim

import org.apache.pekko.actor.ActorSystem
import org.apache.pekko.util.ManifestInfo
import org.scalatest.wordspec.AnyWordSpec

/** Pekko refuses mixed module versions at start; fleetsim turns that off for the one module it
  * must mix (docs/adr/0008), so this holds the others to one version each.
  */
class VersionsSpec extends AnyWordSpec:
  "the classpath" should {
    "hold one Pekko, one Pekko HTTP and one Pekko Management version, spray-json the only exception" in {
      val system = ActorSystem("versions")
      try
        val versions = ManifestInfo(system).versions.view.mapValues(_.toString).toMap
        def family(p: String => Boolean) = versions.filter((module, _) => p(module))
        val http = family(m => m.startsWith("pekko-http") || m == "pekko-parsing")
        val management = family(m => m.startsWith("pekko-management") || m == "pekko-discovery-kubernetes-api")
        val core = versions -- http.keys -- management.keys
        assert(core.size >= 10 && core.values.toSet.size == 1, core)
        assert(management.size >= 3 && management.values.toSet.size == 1, management)
        // When the registry has pekko-http-spray-json at Pekko HTTP's version, depend on it and drop
        // pekko.fail-mixed-versions = off: this fails then as a reminder.
        assert(http("pekko-http-spray-json") == "1.1.0" && (http - "pekko-http-spray-json").values.toSet == Set(http("pekko-http")), http)
        assert(!system.settings.FailMixedVersions)
      finally system.terminate()
    }
  }
