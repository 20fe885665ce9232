package fleetsim.transport.mqtt

import scala.concurrent.duration.FiniteDuration

/** How an MQTT device connects, as its profile describes it: the same for the whole fleet, but for
  * the names each device renders for itself ([[MqttIdentity]]).
  *
  * @param version 5 or 3 (MQTT 3.1.1)
  * @param cleanStart start without the broker's stored session (MQTT 3.1.1: clean session)
  * @param sessionExpiry how long the broker keeps the session after a disconnect (MQTT 5; 3.1.1 keeps
  *                      it while clean session is off)
  * @param maxInFlight QoS 1 publishes a device may have unacknowledged; more fail as overloaded
  * @param pushQos the QoS of the device's subscriptions
  * @param willQos the last will's QoS, and whether the broker retains it
  */
final case class MqttOptions(
    version: Int,
    keepAlive: FiniteDuration,
    cleanStart: Boolean,
    sessionExpiry: FiniteDuration,
    maxInFlight: Int,
    pushQos: Int,
    willQos: Int,
    willRetain: Boolean,
    identity: Int => MqttIdentity)

/** One device's names, rendered from its profile's templates.
  *
  * @param subscriptions the topic filters pushes come on
  * @param will the last will's topic and payload, published by the broker when the device vanishes
  */
final case class MqttIdentity(
    clientId: String,
    username: Option[String],
    password: Option[Array[Byte]],
    subscriptions: Seq[String],
    will: Option[(String, Array[Byte])]):
  override def toString: String = s"MqttIdentity($clientId, ${username.getOrElse("-")})" // never the password
