// The conformance device API (api.conf) on Go's net/http, for HttpConformanceSpec: small fixed
// replies; a body that is not JSON is answered 400, any other call 404. With "chunked" it flushes
// before the handler returns, so replies go out without a Content-Length, in chunks. One access
// log line a request answered.
//
//	server PORT ACCESS_LOG length|chunked
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
)

const token = "c0ffee"

func answer(r *http.Request, body []byte) (int, string, string) {
	switch {
	case r.Method == "POST" && (r.URL.Path == "/join" || r.URL.Path == "/d/"+token+"/heartbeat"):
		if !json.Valid(body) {
			return 400, "not JSON\n", "text/plain"
		}
		if r.URL.Path == "/join" {
			return 200, `{"token":"` + token + `"}`, "application/json"
		}
		return 200, `{"ok":true}`, "application/json"
	case r.Method == "GET" && r.URL.Path == "/d/"+token+"/stats":
		return 200, "ok\n", "text/plain"
	}
	return 404, "not found\n", "text/plain"
}

func main() {
	port, logPath, chunked := os.Args[1], os.Args[2], os.Args[3] == "chunked"
	accessLog, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		panic(err)
	}
	var logging sync.Mutex
	handler := func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		status, reply, kind := answer(r, body)
		w.Header().Set("Content-Type", kind)
		if !chunked {
			w.Header().Set("Content-Length", strconv.Itoa(len(reply)))
		}
		w.WriteHeader(status)
		io.WriteString(w, reply)
		if chunked {
			w.(http.Flusher).Flush()
		}
		logging.Lock()
		fmt.Fprintf(accessLog, "%s \"%s %s %s\" %d\n", r.RemoteAddr, r.Method, r.RequestURI, r.Proto, status)
		logging.Unlock()
	}
	server := &http.Server{Addr: "127.0.0.1:" + port, Handler: http.HandlerFunc(handler)}
	panic(server.ListenAndServe())
}
