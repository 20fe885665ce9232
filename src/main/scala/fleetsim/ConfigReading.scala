package fleetsim

import com.typesafe.config.Config

import java.util.concurrent.TimeUnit.MILLISECONDS
import scala.concurrent.duration.FiniteDuration

/** HOCON durations ("30s") as Scala durations, for the settings classes. */
extension (config: Config)
  def finiteDuration(path: String): FiniteDuration =
    FiniteDuration(config.getDuration(path, MILLISECONDS), MILLISECONDS)
