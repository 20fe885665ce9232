# The conformance device API (api.conf) as a WSGI app for gunicorn (`app:wsgi`) and an ASGI app for
# uvicorn (`app:asgi`), for HttpConformanceSpec: small fixed replies; a body that is not the JSON the
# profile sends, or any other call, is answered 400 or 404, so a request the client garbled shows.
import json

TOKEN = "c0ffee"


def answer(method, path, body):
    """(status, reason, body, content type) for a call."""
    if method == "POST" and path in ("/join", f"/d/{TOKEN}/heartbeat"):
        try:
            json.loads(body)
        except ValueError:
            return 400, "Bad Request", b"not JSON\n", "text/plain"
        reply = b'{"token":"%s"}' % TOKEN.encode() if path == "/join" else b'{"ok":true}'
        return 200, "OK", reply, "application/json"
    if method == "GET" and path == f"/d/{TOKEN}/stats":
        return 200, "OK", b"ok\n", "text/plain"
    return 404, "Not Found", b"not found\n", "text/plain"


def wsgi(environ, start_response):
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = environ["wsgi.input"].read(length) if length else b""
    status, reason, reply, kind = answer(environ["REQUEST_METHOD"], environ["PATH_INFO"], body)
    start_response(f"{status} {reason}", [("Content-Type", kind), ("Content-Length", str(len(reply)))])
    return [reply]


async def asgi(scope, receive, send):
    body, more = b"", True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
    status, _, reply, kind = answer(scope["method"], scope["path"], body)
    headers = [(b"content-type", kind.encode()), (b"content-length", str(len(reply)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": reply})
