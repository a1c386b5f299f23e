package main

import (
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"

	"github.com/rogpeppe/go-internal/testscript"
)

func init() {
	scriptCmds["httpstub"] = cmdHTTPStub
}

// cmdHTTPStub starts a server that answers every request alike: STATUS with the contents of
// BODYFILE (none: an empty body) and a Content-Type of text/html when the body begins with
// "<", else application/json. With -ok N, the first N requests are answered 204 instead.
// With -tls it serves HTTPS, with a certificate no one trusts. NAME is set to its URL, and
// NAME_ADDR to its host:port.
//
//	httpstub NAME [-tls] [-ok N] STATUS [BODYFILE]
func cmdHTTPStub(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: httpstub NAME [-tls] [-ok N] STATUS [BODYFILE]")
	}
	name, args := args[0], args[1:]
	useTLS := args[0] == "-tls"
	if useTLS {
		args = args[1:]
	}
	ok := 0
	if args[0] == "-ok" && len(args) > 2 {
		n, err := strconv.Atoi(args[1])
		ts.Check(err)
		ok, args = n, args[2:]
	}
	status, err := strconv.Atoi(args[0])
	ts.Check(err)
	body := ""
	if len(args) > 1 {
		body = ts.ReadFile(args[1])
	}
	ctype := "application/json"
	if len(body) > 0 && body[0] == '<' {
		ctype = "text/html"
	}
	var n atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if int(n.Add(1)) <= ok {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.Header().Set("Content-Type", ctype)
		w.WriteHeader(status)
		w.Write([]byte(body))
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // TLS handshakes that fail on purpose
	if useTLS {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	ts.Setenv(name, srv.URL)
	ts.Setenv(name+"_ADDR", srv.Listener.Addr().String())
	ts.Defer(srv.Close)
}

// portFree reports whether nothing listens on a loopback port (the condition
// [free:7480] in scripts).
func portFree(port string) bool {
	c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", port))
	if err != nil {
		return true
	}
	c.Close()
	return false
}
