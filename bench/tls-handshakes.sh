#!/usr/bin/env bash
# Benchmark: TLS handshakes a second against the reference controller in its own process, with
# client certificates required (`controller --tls --client-certs-required`), as devices with their
# own certificates make them: full (a new TLS context each time, as a device's first connection) and
# resumed (one context, whose session the server resumes, as a device's reconnects). Each handshake
# ends with one HTTP call, whose reply carries the TLS 1.3 session ticket. Also: client certificates
# issued a second (EC P-256, as --client-ca issues them), on one thread.
#   bench/tls-handshakes.sh        THREADS (default 4) clients, SECONDS_EACH (default 10) a mode
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
threads="${THREADS:-4}"
seconds="${SECONDS_EACH:-10}"
(cd "$here" && mvn -B -q -Dmaven.test.skip=true package)
work="$(mktemp -d)"
java -Xmx2g -jar "$here/target/fleetsim.jar" controller --port 0 --tls --client-certs-required --state-dir "$work/state" > "$work/controller.log" 2>&1 &
controller=$!
trap 'kill $controller 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 100); do grep -q "listening on" "$work/controller.log" && break; sleep 0.2; done
port=$(grep -o 'https://127.0.0.1:[0-9]*' "$work/controller.log" | head -1 | sed 's/.*://')

cat > "$work/bench.jsh" <<JSH
import java.nio.file.*; import java.security.*; import java.security.cert.*; import javax.net.ssl.*;
import java.util.concurrent.*; import java.util.concurrent.atomic.*;
var dir = Path.of("$work/state/tls");
var authority = fleetsim.tls.CertificateAuthority\$.MODULE\$.load(dir.resolve("ca.pem"), dir.resolve("ca.key"));
var trustStore = KeyStore.getInstance("PKCS12"); trustStore.load(null, null); trustStore.setCertificateEntry("ca", authority.certificate());
var trust = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm()); trust.init(trustStore);
var device = authority.issueClient("02:00:00:00:00:01");
var keyStore = KeyStore.getInstance("PKCS12"); keyStore.load(null, null);
keyStore.setKeyEntry("device", device.key(), new char[0], scala.jdk.javaapi.CollectionConverters.asJava(device.chain()).toArray(new java.security.cert.Certificate[0]));
var keys = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm()); keys.init(keyStore, new char[0]);
SSLContext context() throws Exception { var c = SSLContext.getInstance("TLS"); c.init(keys.getKeyManagers(), trust.getTrustManagers(), null); return c; }
byte[] call = "GET /admin/counts HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".getBytes();
void handshake(SSLContext c) throws Exception {
  try (var s = (SSLSocket) c.getSocketFactory().createSocket("127.0.0.1", $port)) {
    var p = s.getSSLParameters(); p.setEndpointIdentificationAlgorithm("HTTPS"); s.setSSLParameters(p);
    s.startHandshake(); s.getOutputStream().write(call); s.getOutputStream().flush();
    if (!new String(s.getInputStream().readAllBytes()).startsWith("HTTP/1.1 200")) throw new IllegalStateException("not answered");
  }
}
double rate(boolean resumed) throws Exception {
  var shared = context(); handshake(shared);
  var done = new AtomicLong(); var failed = new AtomicLong(); long end = System.nanoTime() + ${seconds}L * 1_000_000_000L;
  var pool = Executors.newFixedThreadPool($threads);
  for (int t = 0; t < $threads; t++) pool.submit(() -> { while (System.nanoTime() < end) { try { handshake(resumed ? shared : context()); done.incrementAndGet(); } catch (Exception e) { failed.incrementAndGet(); } } return null; });
  pool.shutdown(); pool.awaitTermination(${seconds} + 60, TimeUnit.SECONDS);
  if (failed.get() > 0) System.out.println("failed: " + failed.get());
  return done.get() / (double) ${seconds};
}
rate(false); // warm up both sides
System.out.printf("| full | %.0f |%n", rate(false));
System.out.printf("| resumed | %.0f |%n", rate(true));
long t0 = System.nanoTime(); for (int i = 0; i < 2000; i++) authority.issueClient("02:00:00:00:" + i);
System.out.printf("| certificates issued (one thread) | %.0f |%n", 2000 / ((System.nanoTime() - t0) / 1e9));
/exit
JSH
{
  echo
  echo "### TLS handshakes a second, client certificates required — $(date -u +%Y-%m-%d)"
  echo
  echo "Machine: $(nproc) cores, $(java -version 2>&1 | head -1). \`bench/tls-handshakes.sh\`: $threads client threads for ${seconds} s a mode against \`./fleetsim controller --tls --client-certs-required\` in its own process, both on this machine."
  echo
  echo "| handshake + one call | per second |"
  echo "| --- | --- |"
  jshell --class-path "$here/target/fleetsim.jar:$(ls "$here"/target/lib/*.jar | tr '\n' ':')" -R-Xmx1g "$work/bench.jsh" 2>&1 | grep '^|\|failed'
} | tee -a "$here/BENCHMARKS.md"
