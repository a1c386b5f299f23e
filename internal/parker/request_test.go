package parker

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestParseRequest(t *testing.T) {
	const body = `{"jsonrpc":"2.0","id":7,"method":"events","params":{"maxItems":1}}`
	post := "POST / HTTP/1.1\r\nHost: node:7480\r\nUser-Agent: evtctl\r\nContent-Type: application/json\r\n" +
		"Accept-Encoding: gzip\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	for _, tc := range []struct {
		in    string
		st    parseStatus
		check func(Request) bool
	}{
		{post, parseOK, func(r Request) bool { return !r.Get && string(r.Body) == body && string(r.Host) == "node:7480" }},
		{post + "POST / HT", parseOK, func(r Request) bool { return string(r.Body) == body }},
		{"GET /events?after=x&waitTime=1s HTTP/1.1\r\nhost: [::1]:80\r\nConnection: Close\r\nauthorization:  Bearer t \r\n\r\n", parseOK,
			func(r Request) bool {
				return r.Get && r.Close && string(r.Query) == "after=x&waitTime=1s" && string(r.Auth) == "Bearer t" && string(r.Host) == "[::1]:80"
			}},
		{"GET /events HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", parseOK, func(r Request) bool { return r.Get && len(r.Query) == 0 }},
		{"", parseMore, nil},
		{"PO", parseMore, nil},
		{post[:len(post)-1], parseMore, nil},
		{"POST / HTTP/1.1\r\nHost: x\r\n", parseMore, nil},
		{"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nabc", parseMore, nil},

		{"PUT / HTTP/1.1\r\nHost: x\r\n\r\n", parseNo, nil},
		{"POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", parseNo, nil},
		{"GET /events/stream HTTP/1.1\r\nHost: x\r\n\r\n", parseNo, nil},
		{"GET /events?a#b HTTP/1.1\r\nHost: x\r\n\r\n", parseNo, nil},
		{"POST / HTTP/1.0\r\nHost: x\r\nContent-Length: 0\r\n\r\n", parseNo, nil},
		{"POST / HTTP/1.1\nHost: x\nContent-Length: 0\n\n", parseNo, nil},
		{"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", parseNo, nil},
		{"POST / HTTP/1.1\r\nHost: x\r\n\r\n", parseNo, nil},                                              // no length
		{"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx", parseNo, nil},   // twice
		{"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: +1\r\n\r\nx", parseNo, nil},                       // not digits
		{"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 99999\r\n\r\n", parseNo, nil},                     // too large
		{"POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n", parseNo, nil},                                    // no host
		{"POST / HTTP/1.1\r\nHost: x\r\nHost: y\r\nContent-Length: 0\r\n\r\n", parseNo, nil},              // two
		{"POST / HTTP/1.1\r\nHost: x/y\r\nContent-Length: 0\r\n\r\n", parseNo, nil},                       // not a host
		{"POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 0\r\n\r\n", parseNo, nil}, // expect
		{"POST / HTTP/1.1\r\nHost: x\r\nConnection: upgrade\r\nContent-Length: 0\r\n\r\n", parseNo, nil},
		{"POST / HTTP/1.1\r\nHost: x\r\nX: a\r\n b\r\nContent-Length: 0\r\n\r\n", parseNo, nil}, // folded
		{"POST / HTTP/1.1\r\nHost: x\r\nX: \xc3\xa9\r\nContent-Length: 0\r\n\r\n", parseNo, nil},
		{"POST / HTTP/1.1\r\nHost: x\r\nX : a\r\nContent-Length: 0\r\n\r\n", parseNo, nil},
		{"GET /events HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}", parseNo, nil}, // a GET with a body
		{"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", parseNo, nil},                   // TLS
	} {
		req, n, st := parseRequest([]byte(tc.in))
		if st != tc.st {
			t.Errorf("%q: status %d, want %d", tc.in, st, tc.st)
			continue
		}
		if st == parseOK && (tc.check != nil && !tc.check(req) || n > len(tc.in)) {
			t.Errorf("%q: read %+v, %d bytes", tc.in, req, n)
		}
	}
}

// FuzzParseRequest holds the parser to net/http: a request it takes, http.ReadRequest reads
// the same way (method, target, host, length, body, Connection: close, Authorization, where
// the next request starts), and an http.Server serves; and it takes the prefix of a request
// it takes for the start of one.
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{
		"POST / HTTP/1.1\r\nHost: node:7480\r\nUser-Agent: evtctl\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
		"GET /events?after=%22x%22&waitTime=1s HTTP/1.1\r\nHost: [::1]\r\nConnection: close\r\nAuthorization: Bearer t\r\n\r\n",
		"POST / HTTP/1.1\r\nhost: a\r\ncontent-length: 003\r\nconnection: keep-alive\r\n\r\nabcPOST",
		"POST / HTTP/1.1\r\nHost: a\r\nX:\t v \t\r\nContent-Length: 0\r\n\r\n",
		"GET /events HTTP/1.1\r\nHost: 1.2.3.4:5\r\nAuthorization:\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		req, n, st := parseRequest(in)
		if st == parseOK {
			for i := range n {
				if _, _, st := parseRequest(in[:i]); st == parseOK {
					t.Fatalf("%q: the prefix of %d bytes is a whole request too", in, i)
				}
			}
		}
		if st != parseOK {
			return
		}
		br := bufio.NewReader(bytes.NewReader(in))
		hr, err := http.ReadRequest(br)
		if err != nil {
			t.Fatalf("%q: taken, but http.ReadRequest: %v", in, err)
		}
		body, err := io.ReadAll(hr.Body)
		if err != nil {
			t.Fatalf("%q: reading the body: %v", in, err)
		}
		rest, _ := io.ReadAll(br)
		method := "POST"
		if req.Get {
			method = "GET"
		}
		switch {
		case hr.Method != method, hr.RequestURI != string(req.Target), hr.Proto != "HTTP/1.1",
			hr.Host != string(req.Host), hr.ContentLength != int64(len(req.Body)), hr.TransferEncoding != nil,
			!bytes.Equal(body, req.Body), hr.Close != req.Close, !bytes.Equal(rest, in[n:]),
			len(hr.Header.Values("Authorization")) > 1, hr.Header.Get("Authorization") != string(req.Auth),
			req.Get && hr.URL.RawQuery != string(req.Query):
			t.Fatalf("%q: read as %+v, but net/http reads %s %s %s host %q length %d body %q close %v auth %q rest %q",
				in, req, hr.Method, hr.RequestURI, hr.Proto, hr.Host, hr.ContentLength, body, hr.Close, hr.Header.Get("Authorization"), rest)
		}
		if got := serveOne(in[:n]); got != hr.Method+" "+hr.RequestURI {
			t.Fatalf("%q: an http.Server answered %q", in, got)
		}
	})
}

// serveOne serves one connection carrying req with an http.Server, and returns the method and
// target its handler saw, or what it answered without calling the handler.
func serveOne(req []byte) string {
	client, server := net.Pipe()
	seen := make(chan string, 1)
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Method + " " + r.RequestURI
	})}
	ln := &oneConn{c: server}
	go hs.Serve(ln)
	defer hs.Close()
	go func() {
		client.Write(req)
	}()
	_ = client.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(client), nil)
	client.Close()
	select {
	case s := <-seen:
		return s
	default:
	}
	if err != nil {
		return err.Error()
	}
	return strings.TrimSpace(resp.Status)
}

// oneConn is a listener of one connection.
type oneConn struct {
	mu   sync.Mutex
	c    net.Conn
	done chan struct{}
}

func (l *oneConn) Accept() (net.Conn, error) {
	l.mu.Lock()
	c := l.c
	l.c = nil
	if l.done == nil {
		l.done = make(chan struct{})
	}
	done := l.done
	l.mu.Unlock()
	if c != nil {
		return c, nil
	}
	<-done
	return nil, net.ErrClosed
}

func (l *oneConn) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done == nil {
		l.done = make(chan struct{})
	}
	select {
	case <-l.done:
	default:
		close(l.done)
	}
	return nil
}

func (l *oneConn) Addr() net.Addr { return &net.TCPAddr{} }
