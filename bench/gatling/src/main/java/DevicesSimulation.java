import static io.gatling.javaapi.core.CoreDsl.*;
import static io.gatling.javaapi.http.HttpDsl.*;

import io.gatling.javaapi.core.ScenarioBuilder;
import io.gatling.javaapi.core.Simulation;
import io.gatling.javaapi.http.HttpProtocolBuilder;
import java.time.Duration;

/** bench/peers.sh's workload in Gatling: each virtual user a device that joins once (a POST whose
  * reply gives its id) and then posts a heartbeat every 10 s, paced, until the run's end. The users
  * share connections: 100,000 of their own would not fit this machine's 20,000 open files. */
public class DevicesSimulation extends Simulation {
  private final int devices = Integer.getInteger("devices", 100000);
  private final int rampSeconds = Integer.getInteger("ramp", 20);
  private final int seconds = Integer.getInteger("seconds", 180);
  private final int connections = Integer.getInteger("connections", 0); // the most the shared pool opens; 0: no limit

  private final HttpProtocolBuilder protocol = limited(http.baseUrl(System.getProperty("url", "http://127.0.0.1:8080"))
      .shareConnections().contentTypeHeader("application/json"));

  private HttpProtocolBuilder limited(HttpProtocolBuilder protocol) {
    return connections > 0 ? protocol.maxConnectionsPerHost(connections) : protocol;
  }

  private final ScenarioBuilder device = scenario("device")
      .exec(session -> session.set("mac", String.format("02:00:%02x:%02x:%02x:%02x",
          (session.userId() >> 24) & 0xff, (session.userId() >> 16) & 0xff, (session.userId() >> 8) & 0xff, session.userId() & 0xff)))
      .exec(http("join").post("/join").body(StringBody("{\"mac\":\"#{mac}\"}")).check(jsonPath("$.id").saveAs("id")))
      .during(Duration.ofSeconds(seconds - rampSeconds)).on(
          pace(Duration.ofSeconds(10)).exec(http("heartbeat").post("/heartbeat/#{id}").body(StringBody("{\"uptime\":1}"))));

  {
    setUp(device.injectOpen(rampUsers(devices).during(Duration.ofSeconds(rampSeconds)))).protocols(protocol);
  }
}
