package fleetsim.controller

import ch.qos.logback.classic.{Level, LoggerContext}
import ch.qos.logback.classic.spi.LoggingEvent
import ch.qos.logback.core.spi.FilterReply
import org.scalatest.funsuite.AnyFunSuite

class BrokerRaceFilterSpec extends AnyFunSuite:
  private val context = LoggerContext()
  private def event(logger: String, message: String) =
    LoggingEvent("fqcn", context.getLogger(logger), Level.WARN, message, null, null)

  test("the broker's ramp race is dropped; its other warnings, and anyone else's, are kept") {
    val filter = BrokerRaceFilter()
    val broker = "io.moquette.broker.MQTTConnection"
    assert(filter.decide(event(broker, "SUBSCRIBE received on already closed connection")) == FilterReply.DENY)
    assert(filter.decide(event(broker, "DISCONNECT received on already closed connection")) == FilterReply.DENY)
    assert(filter.decide(event(broker, "CONNACK send failed, cleanup session and close the connection")) == FilterReply.NEUTRAL)
    assert(filter.decide(event("fleetsim.Other", "SUBSCRIBE received on already closed connection")) == FilterReply.NEUTRAL)
  }
