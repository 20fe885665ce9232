// The conformance device API (api.conf) on Node's http module, for HttpConformanceSpec: small fixed
// replies, written with res.write before res.end so that they go out chunked (no Content-Length); a
// body that is not JSON is answered 400, any other call 404. One access log line a request answered.
//
//   node server.js PORT ACCESS_LOG
'use strict';
const http = require('http');
const fs = require('fs');

const [port, logPath] = process.argv.slice(2);
const accessLog = fs.openSync(logPath, 'a');
const token = 'c0ffee';

function answer(method, path, body) {
  if (method === 'POST' && (path === '/join' || path === `/d/${token}/heartbeat`)) {
    try { JSON.parse(body); } catch { return [400, 'not JSON\n', 'text/plain']; }
    return [200, path === '/join' ? `{"token":"${token}"}` : '{"ok":true}', 'application/json'];
  }
  if (method === 'GET' && path === `/d/${token}/stats`) return [200, 'ok\n', 'text/plain'];
  return [404, 'not found\n', 'text/plain'];
}

http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (chunk) => chunks.push(chunk));
  req.on('end', () => {
    const path = new URL(req.url, 'http://127.0.0.1').pathname;
    const [status, reply, kind] = answer(req.method, path, Buffer.concat(chunks).toString());
    res.writeHead(status, { 'Content-Type': kind });
    res.write(reply);
    res.end();
    fs.writeSync(accessLog, `${req.socket.remoteAddress} "${req.method} ${req.url} HTTP/${req.httpVersion}" ${status}\n`);
  });
}).listen(Number(port), '127.0.0.1');
