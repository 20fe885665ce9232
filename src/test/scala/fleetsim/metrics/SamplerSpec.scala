package fleetsim.metrics

import fleetsim.device.DeviceState
import fleetsim.transport.{FailureReason, MessageKind, Reply}
import org.scalatest.funsuite.AnyFunSuite
import org.scalatest.matchers.should.Matchers

/** A second of a run as the status line, dashboard, time series and report see it: devices by state,
  * rates since the previous sample, errors since the start as the profile judged the replies.
  */
class SamplerSpec extends AnyFunSuite with Matchers:
  private val kinds = IndexedSeq(MessageKind("register", 0, periodic = false), MessageKind("checksum", 1, periodic = true))
  private def reply(status: Int) = Reply.Response(status, Array.emptyByteArray)

  test("devices by state, every state named, Stopped included") {
    val metrics = FleetMetrics(kinds)
    (1 to 3).foreach(_ => metrics.moved(None, DeviceState.Discovering))
    metrics.moved(Some(DeviceState.Discovering), DeviceState.Reporting)
    metrics.moved(Some(DeviceState.Discovering), DeviceState.Stopped)
    metrics.halted("register: 403")
    val sample = Sampler(kinds, ProcessWatch(), target = 5, sessions = SessionFigures.none).sample(metrics.snapshot())
    sample.devices.keySet shouldBe DeviceState.values.map(_.toString).toSet
    sample.devices should contain allOf ("Discovering" -> 1L, "Reporting" -> 1L, "Stopped" -> 1L)
    sample.running shouldBe 3
    sample.target shouldBe 5
    sample.tunnels shouldBe None
  }

  test("errors count replies as the profile judged them: an expected 404 is none, an unexpected 200 is one") {
    val metrics = FleetMetrics(kinds)
    val sampler = Sampler(kinds, ProcessWatch(), target = 1, sessions = SessionFigures.none)
    def call(kind: MessageKind, status: Int) =
      metrics.sent(kind)
      metrics.replied(kind, reply(status), 1_000_000L)
    call(kinds(0), 200)
    metrics.judged(kinds(0), reply(200), Some(FailureReason.UnexpectedStatus)) // it expected 201
    call(kinds(1), 404)
    metrics.judged(kinds(1), reply(404), None) // it expects 404: ok
    call(kinds(1), 403)
    val first = sampler.sample(metrics.snapshot())
    first.errors shouldBe 2 // the unexpected 200 and the 403
    val snapshot = metrics.snapshot()
    snapshot.byKind("register").failures(FailureReason.UnexpectedStatus) shouldBe 1
    snapshot.byKind("checksum").ok shouldBe 1
    for k <- snapshot.byKind.values do k.sent shouldBe k.ok + k.forbidden + k.failed
    call(kinds(1), 200)
    val second = sampler.sample(metrics.snapshot())
    second.errors shouldBe 2 // since the start
    second.rates("checksum").ok should be > 0.0
    second.rates("register").sent shouldBe 0.0 // none since the first sample
  }
