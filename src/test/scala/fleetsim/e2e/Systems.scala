package fleetsim.e2e

import com.typesafe.config.Config
import org.apache.pekko.actor.typed.{ActorSystem, SpawnProtocol}

import scala.concurrent.Await
import scala.concurrent.duration.*

/** An actor system for one test, terminated whatever the test does. */
def withSystem(config: Config)(test: ActorSystem[SpawnProtocol.Command] ?=> Unit): Unit =
  val system = ActorSystem(SpawnProtocol(), "e2e", config)
  try test(using system)
  finally
    system.terminate()
    Await.result(system.whenTerminated, 30.seconds)
