package fleetsim.controller

import ch.qos.logback.classic.spi.ILoggingEvent
import ch.qos.logback.core.filter.Filter
import ch.qos.logback.core.spi.FilterReply

/** Drops the embedded broker's warnings about its ramp race (docs/mqtt.md): Moquette marks a
  * connection open only once its CONNACK's write is done, may read the device's SUBSCRIBE (or
  * DISCONNECT) first, and then closes it. The fleet counts those connects (protocolError); dozens of
  * warnings would interleave with the status lines. Its other warnings (bad credentials, a wrong
  * protocol version) still show. Named in logback.xml.
  */
final class BrokerRaceFilter extends Filter[ILoggingEvent]:
  def decide(event: ILoggingEvent): FilterReply =
    if event.getLoggerName == "io.moquette.broker.MQTTConnection" && String.valueOf(event.getMessage).endsWith("received on already closed connection")
    then FilterReply.DENY
    else FilterReply.NEUTRAL
