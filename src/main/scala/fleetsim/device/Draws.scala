package fleetsim.device

import java.util.random.RandomGenerator

/** The devices' random choices (start delays, phases, jitter, backoff, retry pauses, the values a
  * template generates) as a function of the run's seed, the device's number and the moment it
  * draws at: the same seed draws the same for each device, run after run, whichever thread or node
  * runs it. The moment is made of what the device counts already (its epoch, a message's rounds,
  * its failures in a row), so a device keeps nothing more for it.
  */
trait Draws:
  /** Draws for device `number` at the moment (epoch, what, a, b); valid until its next call on this thread. */
  def at(number: Int, epoch: Int, what: Int, a: Long, b: Long): RandomGenerator
  /** The draws as the last [[at]] on this thread left them: what a template rendered then draws from. */
  def current: RandomGenerator

object Draws:
  /** What a device draws for (the `what` of a moment). */
  val Boot = 1
  val Phase = 2
  val Jitter = 3
  val Backoff = 4
  val Pause = 5
  val Retry = 6
  val Render = 7

  /** The run's draws from `seed`. */
  def seeded(seed: Long): Draws = new Draws:
    private val streams = ThreadLocal.withInitial(() => new Stream)
    def at(number: Int, epoch: Int, what: Int, a: Long, b: Long): RandomGenerator =
      val stream = streams.get()
      stream.state = mix(mix(mix(mix(seed ^ number.toLong * Gamma) ^ (epoch.toLong << 8 | what)) ^ a) ^ b)
      stream
    def current: RandomGenerator = streams.get()

  /** Always `generator`, whatever the moment: a test's fixed choices. */
  def fixed(generator: RandomGenerator): Draws = new Draws:
    def at(number: Int, epoch: Int, what: Int, a: Long, b: Long): RandomGenerator = generator
    def current: RandomGenerator = generator

  private val Gamma = 0x9e3779b97f4a7c15L

  /** SplitMix64's finalizer: every bit of the input moves about half the bits of the output. */
  private def mix(z0: Long): Long =
    var z = z0 + Gamma
    z = (z ^ (z >>> 30)) * 0xbf58476d1ce4e5b9L
    z = (z ^ (z >>> 27)) * 0x94d049bb133111ebL
    z ^ (z >>> 31)

  /** SplitMix64 from the state a moment sets: one per thread, as a device draws only on its own. */
  private final class Stream extends RandomGenerator:
    var state = 0L
    def nextLong(): Long =
      state += Gamma
      mix(state)
