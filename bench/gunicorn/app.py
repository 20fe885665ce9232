"""The controller of bench/per-call-gunicorn.sh: a WSGI app as Django and Flask apps are served,
by gunicorn's sync workers, which answer one request per connection and close it."""
import itertools

ids = itertools.count(1)


def app(environ, start_response):
    path = environ["PATH_INFO"]
    if environ["REQUEST_METHOD"] == "POST" and path == "/join":
        environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        body = b'{"id":"d%d"}' % next(ids)
    elif path.startswith("/heartbeat/"):
        body = b'{"ok":true}'
    else:
        start_response("404 Not Found", [("Content-Length", "0")])
        return [b""]
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]
