package fleetsim.scenario

import fleetsim.control.RunControl
import org.apache.pekko.actor.{Cancellable, Scheduler}
import org.slf4j.LoggerFactory

import scala.concurrent.ExecutionContext

/** Plays a scenario on a run through its [[RunControl]], from now: each resize of its timeline and
  * each action at its time, the same for a run in one process and over a cluster. The run's
  * duration is the timeline's length, so the run ends itself.
  *
  * @param seed the run's seed: action i draws its devices with `seed + i` unless it names its own
  */
final class ScenarioDriver(scenario: Scenario, timeline: Timeline, seed: Long, control: RunControl)(using scheduler: Scheduler, ec: ExecutionContext):
  private val log = LoggerFactory.getLogger(classOf[ScenarioDriver])

  private val scheduled: Seq[Cancellable] =
    timeline.resizes.map { r =>
      scheduler.scheduleOnce(r.at)(control.resize(r.devices, Some(r.rate), r.leave).left.foreach(why => log.warn("scenario resize: {}", why)))
    } ++ scenario.actions.zipWithIndex.map { (a, i) =>
      scheduler.scheduleOnce(a.at)(control.act(a.make(a.seed.getOrElse(seed + i)), Some(a.name)))
    }

  /** Nothing more is done: the run is finishing. */
  def cancel(): Unit = scheduled.foreach(_.cancel())
