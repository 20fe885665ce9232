#!/usr/bin/env python3
"""A hostile HTTP/1.1 server for HostileServersSpec: it answers a fleet's join as a controller would,
then breaks HTTP on the calls under test, so that the spec can show that no reply breaks fleetsim's
own client (src/main/scala/fleetsim/transport) or is counted ok. Python's standard library only:
the server must not share a single line of HTTP code with the client it tests.

    hostile_server.py MODE [--port P] [--record DIR] [--until-stdin-closes]

binds 127.0.0.1 (port P, or a free one), prints "port N" and serves until killed (or, with
--until-stdin-closes, until its standard input closes: the test JVM went away). With --record DIR every byte received on the Nth
connection is written, as it came, to DIR/conn-N.bin: the spec reads what went on the wire there.

Every mode answers POST /join with 200 {"token": ...}. MODE says what every other call gets, or
`by-path` lets each call's path say it: /MODE[/N]/... (N: the mode's size, where it has one).
"""
import argparse
import itertools
import json
import os
import socket
import struct
import sys
import threading
import time

CHUNK = b"x" * 65536


class Request:
    def __init__(self, method, target, headers, body):
        self.method, self.target, self.headers, self.body = method, target, headers, body


class Connection:
    """One client connection: reads requests (recording every byte), writes raw replies."""

    def __init__(self, sock, record):
        self.sock = sock
        self.record = record
        self.buffer = b""

    def read_more(self):
        try:
            data = self.sock.recv(65536)
        except OSError:
            return False
        if not data:
            return False
        if self.record:
            self.record.write(data)
            self.record.flush()
        self.buffer += data
        return True

    def next_request(self):
        """The next request, or None once the client has closed. Lenient: it must read whatever a
        broken client sends, to record it and answer it."""
        while b"\r\n\r\n" not in self.buffer:
            if not self.read_more():
                return None
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        parts = lines[0].split(b" ")
        method = parts[0].decode("latin-1")
        target = parts[1].decode("latin-1") if len(parts) > 1 else "/"
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            headers[name.strip().lower().decode("latin-1")] = value.strip()
        try:
            length = max(0, int(headers.get("content-length", b"0")))
        except ValueError:
            length = 0
        while len(self.buffer) < length:
            if not self.read_more():
                return None
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        return Request(method, target, headers, body)

    def send(self, data):
        self.sock.sendall(data)

    def finish(self):
        """Closes its half (FIN) and records what the client still sends, until it closes too."""
        try:
            self.sock.shutdown(socket.SHUT_WR)
            self.sock.settimeout(2)
            while self.read_more():
                pass
        except OSError:
            pass

    def reset(self):
        """Ends the connection with a TCP RST, not a FIN: an abort, as a crashing server's kernel sends."""
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.sock.close()


def response(status, body, reason="OK", content_type=b"application/json", extra=b""):
    return (b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n%s\r\n"
            % (status, reason.encode(), content_type, len(body), extra)) + body


ACK = response(200, b'{"ack":"yes"}')

# Tokens the join of mode `inject` hands out, by device number: each would add a header line or a
# whole second request if rendered raw into a request's path or a header value.
INJECTED = [
    "abc\r\nX-Injected: 1",
    "x HTTP/1.1\r\nHost: h\r\n\r\nGET /smuggled HTTP/1.1",
    "nul\x00byte",
]


def join(conn, request, mode):
    try:
        number = int(json.loads(request.body or b"{}").get("number", 0))
    except (ValueError, AttributeError):
        number = 0
    token = INJECTED[number % len(INJECTED)] if mode == "inject" else "tok-%d" % number
    conn.send(response(200, json.dumps({"token": token}).encode()))
    return True


# Each mode: (connection, size or None) -> whether to go on reading requests on the connection.

def ok(conn, size):
    conn.send(ACK)
    return True


def slow(conn, size):
    """200 {}, after `size` ms (default 1500) of silence: a call in flight, not an idle connection."""
    time.sleep((size or 1500) / 1000)
    conn.send(ACK)
    return True


def endless_chunked(conn, size):
    """200, chunked, chunks of 64 KiB for ever: until the client gives up and closes."""
    conn.send(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
    chunk = b"10000\r\n" + CHUNK + b"\r\n"
    while True:
        conn.send(chunk)


def endless_length(conn, size):
    """200 with a Content-Length of a terabyte, and bytes for ever."""
    conn.send(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000000000\r\n\r\n")
    while True:
        conn.send(CHUNK)


def huge_header(conn, size):
    """200 {} behind one header line of `size` bytes (10 MiB)."""
    conn.send(b"HTTP/1.1 200 OK\r\nX-Huge: " + b"h" * (size or 10 * 1024 * 1024) + b"\r\nContent-Length: 13\r\n\r\n" + b'{"ack":"yes"}')
    return True


def many_headers(conn, size):
    """200 {} behind `size` (1,000) short header lines."""
    lines = b"".join(b"X-Header-%d: %d\r\n" % (i, i) for i in range(size or 1000))
    conn.send(b"HTTP/1.1 200 OK\r\n" + lines + b"Content-Length: 13\r\n\r\n" + b'{"ack":"yes"}')
    return True


def long_status_line(conn, size):
    """200 {} under a status line of `size` (2,048) bytes: a reason phrase without end."""
    conn.send(b"HTTP/1.1 200 " + b"O" * (size or 2048) + b"\r\nContent-Length: 13\r\n\r\n" + b'{"ack":"yes"}')
    return True


def long_length(conn, size):
    """Content-Length: 100 over a body of 2 bytes, then the server closes (FIN)."""
    conn.send(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{}")
    conn.finish()
    return False


def short_length(conn, size):
    """500 with Content-Length: 2 over a longer body: {} and then the start of a forged 200 head
    (`HTTP/1.1 200 OK` and a header left open). A client must not glue those stray bytes to the
    next reply on the connection, which would then read as a 200 whose header holds the real 500."""
    conn.send(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 2\r\n\r\n{}HTTP/1.1 200 OK\r\nX-Stray: ")
    return True


def negative_length(conn, size):
    """Content-Length: -5, a body of {}, then the server closes (FIN)."""
    conn.send(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: -5\r\n\r\n{}")
    conn.finish()
    return False


def garbage(conn, size):
    """No HTTP at all: an SSH banner and binary bytes (fleetsim pointed at the wrong port), ending
    in a blank line; the connection stays open and each call gets the same."""
    conn.send(b"SSH-2.0-OpenSSH_9.6\r\n" + bytes(range(256)) + b"\r\n\r\n")
    return True


def status_999(conn, size):
    conn.send(b"HTTP/1.1 999 Nonsense\r\nContent-Type: application/json\r\nContent-Length: 13\r\n\r\n" + b'{"ack":"yes"}')
    return True


def close_mid_body(conn, size):
    """A chunked body cut off in the middle of its first chunk by a TCP reset."""
    conn.send(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n40\r\n" + b'{"ack":"par')
    conn.reset()
    return False


def reset_at_once(conn, size):
    """No reply at all: the request read, the connection ends with a TCP reset."""
    conn.reset()
    return False


def empty_json(conn, size):
    conn.send(response(200, b"{}"))
    return True


def hello(conn, size):
    conn.send(response(200, b"hello", content_type=b"text/plain"))
    return True


def body(conn, size):
    """200 with an honest Content-Length over `size` (1 MiB) bytes of JSON."""
    size = size or 1024 * 1024
    conn.send(response(200, b'{"ack":"' + b"b" * max(0, size - 10) + b'"}'))
    return True


def chunked_body(conn, size):
    """200 with a chunked body of `size` (1 MiB) bytes in chunks of 4 KiB."""
    size = size or 1024 * 1024
    out = [b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"]
    left = size
    while left > 0:
        n = min(4096, left)
        out.append(b"%x\r\n%s\r\n" % (n, b"c" * n))
        left -= n
    out.append(b"0\r\n\r\n")
    conn.send(b"".join(out))
    return True


MODES = {
    "ok": ok,
    "slow": slow,
    "endless-chunked": endless_chunked,
    "endless-length": endless_length,
    "huge-header": huge_header,
    "many-headers": many_headers,
    "long-status-line": long_status_line,
    "long-length": long_length,
    "short-length": short_length,
    "negative-length": negative_length,
    "garbage": garbage,
    "status-999": status_999,
    "close-mid-body": close_mid_body,
    "reset-at-once": reset_at_once,
    "empty-json": empty_json,
    "hello": hello,
    "body": body,
    "chunked-body": chunked_body,
    "inject": ok,  # its calls are answered; its join is the hostile part
}


def serve(sock, number, mode, record_dir):
    record = open(os.path.join(record_dir, "conn-%d.bin" % number), "wb") if record_dir else None
    conn = Connection(sock, record)
    try:
        going = True
        while going:
            request = conn.next_request()
            if request is None:
                break
            segments = request.target.split("?")[0].strip("/").split("/")
            if segments[0] == "join":
                going = join(conn, request, mode)
                continue
            name, size = mode, None
            if mode == "by-path":
                name = segments[0]
                if len(segments) > 1 and segments[1].isdigit():
                    size = int(segments[1])
            going = MODES.get(name, ok)(conn, size)
    except OSError:
        pass  # the client closed or reset: what it should do with a reply like these
    finally:
        try:
            sock.close()
        except OSError:
            pass
        if record:
            record.close()


def exit_when_stdin_closes():
    while sys.stdin.buffer.read(4096):
        pass
    os._exit(0)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=sorted(MODES) + ["by-path"])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--record", help="directory for conn-N.bin, the bytes received on each connection")
    parser.add_argument("--until-stdin-closes", action="store_true", help="exit when standard input closes (the parent went away)")
    args = parser.parse_args()
    if args.record:
        os.makedirs(args.record, exist_ok=True)
    server = socket.create_server(("127.0.0.1", args.port), backlog=256)
    print("port %d" % server.getsockname()[1], flush=True)
    if args.until_stdin_closes:
        threading.Thread(target=exit_when_stdin_closes, daemon=True).start()
    for number in itertools.count():
        sock, _ = server.accept()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=serve, args=(sock, number, args.mode, args.record), daemon=True).start()


if __name__ == "__main__":
    main()
