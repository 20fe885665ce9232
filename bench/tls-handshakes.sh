#!/usr/bin/env bash
# Benchmark: TLS handshakes a second with client certificates, as devices with their own
# certificates make them (bench/TlsHandshakes.java: full and resumed, and the client's CPU a
# handshake), against two servers in their own processes: the reference controller
# (`controller --tls --client-certs-required`, the JDK's TLS) and `openssl s_server` with the same
# certificates, which shows what the fleet's side does when the server is not the limit. Also:
# client certificates issued a second (EC P-256, as --client-ca issues them), on one thread. Each in
# TLS 1.3 and in TLS 1.2 (--tls-version), whose resumption needs no new key exchange. Appends a table
# to bench/history/DATE-tls-handshakes.md.
#   bench/tls-handshakes.sh        THREADS (default 4) clients, SECONDS_EACH (default 20) a mode,
#                                  after 15 s of warm-up a mode
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
threads="${THREADS:-4}"
seconds="${SECONDS_EACH:-20}"
(cd "$here" && mvn -B -q -Dmaven.test.skip=true package)
work="$(mktemp -d)"
classpath="$here/target/fleetsim.jar:$(ls "$here"/target/lib/*.jar | tr '\n' ':')"
java -Xmx2g -jar "$here/target/fleetsim.jar" controller --port 0 --tls --client-certs-required --state-dir "$work/state" > "$work/controller.log" 2>&1 &
controller=$!
trap 'kill $controller ${sserver:-} 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 100); do grep -q "listening on" "$work/controller.log" && break; sleep 0.2; done
port=$(grep -o 'https://127.0.0.1:[0-9]*' "$work/controller.log" | head -1 | sed 's/.*://')
tls="$work/state/tls"
history="$here/bench/history/$(date -u +%Y-%m-%d)-tls-handshakes.md" # a day's runs of it, newest last
mkdir -p "$(dirname "$history")"
{
  echo
  echo "### TLS handshakes a second, client certificates required — $(date -u +%Y-%m-%d), build $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo "—")"
  echo
  echo "Machine: $(nproc) cores, $(java -version 2>&1 | head -1), $(openssl version | cut -d' ' -f1-2). \`bench/tls-handshakes.sh\`: $threads client threads (\`bench/TlsHandshakes.java\`, JDK SSLSocket, EC P-256 client certificate) for ${seconds} s a mode after 15 s of warm-up, against each server in its own process on this machine; client CPU = the client threads' CPU time / handshakes; server CPU = the server process's user + system time / handshakes."
  echo
  echo "| server | handshake + one call | per second | client CPU ms each | server CPU ms each |"
  echo "| --- | --- | --- | --- | --- |"
  for server in controller openssl; do
    if [ "$server" = openssl ]; then
      kill $controller; wait $controller 2>/dev/null || true
      port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
      openssl s_server -accept "127.0.0.1:$port" -cert "$tls/server.pem" -key "$tls/server.key" -CAfile "$tls/ca.pem" -Verify 1 -www -quiet > "$work/s_server.log" 2>&1 &
      sserver=$!; pid=$sserver; name="openssl s_server"
      for _ in $(seq 50); do (echo > /dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.2; done
    else
      pid=$controller; name="fleetsim controller"
    fi
    for protocol in TLSv1.3 TLSv1.2; do
      java -cp "$classpath" "$here/bench/TlsHandshakes.java" "$tls" "$port" "$threads" "$seconds" "$name" "$pid" "$protocol" 2> "$work/$server.err" \
        | grep '^|\|failed' || { cat "$work/$server.err" >&2; exit 1; }
    done
  done
} | tee -a "$history"
echo "bench: appended to ${history#"$here"/}; update BENCHMARKS.md from it (its last section says how)" >&2
