import java.lang.management.ManagementFactory;
import java.nio.file.Path;
import java.security.KeyStore;
import java.util.concurrent.*;
import java.util.concurrent.atomic.AtomicLong;
import javax.net.ssl.*;

/** TLS handshakes a second as devices with their own certificates make them, and the client's CPU
  * for each: full (a new TLS context each time, as a device's first connection) and resumed (one
  * context, whose session the server resumes, as a device's reconnects). Each handshake ends with
  * one HTTP call, whose reply carries the TLS 1.3 session ticket. Run by bench/tls-handshakes.sh:
  *   java -cp JARS bench/TlsHandshakes.java TLS_DIR PORT THREADS SECONDS SERVER_NAME SERVER_PID
  */
public class TlsHandshakes {
  static KeyManagerFactory keys;
  static TrustManagerFactory trust;
  static String host = "127.0.0.1";
  static int port;
  static String serverPid;
  static String protocol;
  static final byte[] CALL = "GET /admin/counts HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".getBytes();

  public static void main(String[] args) throws Exception {
    Path dir = Path.of(args[0]);
    port = Integer.parseInt(args[1]);
    int threads = Integer.parseInt(args[2]);
    int seconds = Integer.parseInt(args[3]);
    String server = args[4];
    serverPid = args[5];
    protocol = args.length > 6 ? args[6] : "TLSv1.3";
    var authority = fleetsim.tls.CertificateAuthority$.MODULE$.load(dir.resolve("ca.pem"), dir.resolve("ca.key"));
    var trustStore = KeyStore.getInstance("PKCS12");
    trustStore.load(null, null);
    trustStore.setCertificateEntry("ca", authority.certificate());
    trust = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
    trust.init(trustStore);
    var device = authority.issueClient("02:00:00:00:00:01");
    var keyStore = KeyStore.getInstance("PKCS12");
    keyStore.load(null, null);
    keyStore.setKeyEntry("device", device.key(), new char[0],
        scala.jdk.javaapi.CollectionConverters.asJava(device.chain()).toArray(new java.security.cert.Certificate[0]));
    keys = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
    keys.init(keyStore, new char[0]);

    rate(false, threads, 15); // warm up the JIT on both modes, both sides
    rate(true, threads, 15);
    for (boolean resumed : new boolean[] {false, true}) {
      double[] r = rate(resumed, threads, seconds);
      System.out.printf("| %s | %s %s | %.0f | %.2f | %.2f |%n", server, protocol, resumed ? "resumed" : "full", r[0], r[1], r[2]);
    }
    if (server.startsWith("fleetsim") && protocol.equals("TLSv1.3")) {
      long t0 = System.nanoTime();
      for (int i = 0; i < 2000; i++) authority.issueClient("02:00:00:00:" + i);
      System.out.printf("| | certificates issued (one thread, EC P-256) | %.0f | %.2f | |%n",
          2000 / ((System.nanoTime() - t0) / 1e9), (System.nanoTime() - t0) / 1e6 / 2000);
    }
  }

  static SSLContext context() throws Exception {
    var c = SSLContext.getInstance("TLS");
    c.init(keys.getKeyManagers(), trust.getTrustManagers(), null);
    return c;
  }

  static void handshake(SSLContext c) throws Exception {
    try (var s = (SSLSocket) c.getSocketFactory().createSocket(host, port)) {
      s.setTcpNoDelay(true); // as Pekko's connections do: otherwise Nagle holds each flight's second write for a delayed ACK
      var p = s.getSSLParameters();
      p.setEndpointIdentificationAlgorithm("HTTPS");
      p.setProtocols(new String[] {protocol});
      s.setSSLParameters(p);
      s.startHandshake();
      s.getOutputStream().write(CALL);
      s.getOutputStream().flush();
      if (!new String(s.getInputStream().readAllBytes()).startsWith("HTTP/1.")) throw new IllegalStateException("not answered");
    }
  }

  /** The server process's user + system CPU so far, in milliseconds (clock ticks of 10 ms). */
  static long serverCpuMillis() throws Exception {
    String stat = java.nio.file.Files.readString(Path.of("/proc", serverPid, "stat"));
    String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
    return (Long.parseLong(f[11]) + Long.parseLong(f[12])) * 10;
  }

  /** Handshakes a second, and the client threads' and the server's CPU milliseconds a handshake. */
  static double[] rate(boolean resumed, int threads, int seconds) throws Exception {
    var shared = context();
    handshake(shared);
    var done = new AtomicLong();
    var failed = new AtomicLong();
    var cpu = new AtomicLong();
    long end = System.nanoTime() + seconds * 1_000_000_000L;
    long serverFrom = serverCpuMillis();
    var pool = Executors.newFixedThreadPool(threads);
    var bean = ManagementFactory.getThreadMXBean();
    for (int t = 0; t < threads; t++)
      pool.submit(() -> {
        long from = bean.getCurrentThreadCpuTime();
        while (System.nanoTime() < end) {
          try {
            handshake(resumed ? shared : context());
            done.incrementAndGet();
          } catch (Exception e) {
            if (failed.incrementAndGet() == 1) System.err.println("failed: " + e);
          }
        }
        cpu.addAndGet(bean.getCurrentThreadCpuTime() - from);
        return null;
      });
    pool.shutdown();
    pool.awaitTermination(seconds + 60, TimeUnit.SECONDS);
    if (failed.get() > 0) System.out.println("failed: " + failed.get());
    long n = Math.max(1, done.get());
    return new double[] {done.get() / (double) seconds, cpu.get() / 1e6 / n, (serverCpuMillis() - serverFrom) / (double) n};
  }
}
