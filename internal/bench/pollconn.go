package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http/httputil"
	"net/url"
	"strconv"
	"time"

	"github.com/tidwall/gjson"

	"github.com/evtctl/evtctl/pkg/client"
)

// pollConn is one poller's connection: an HTTP/1.1 client of the events method that does
// only what a long-poll needs — write a request built in place, read the reply's status,
// length and body — so that thousands of pollers cost the bench little beside the node they
// measure (Go's HTTP client spent about 130 µs of CPU per reply, more than the node).
type pollConn struct {
	ep    *pollEndpoint
	c     net.Conn
	rw    io.ReadWriter // c, or raw system calls on it (rawIO)
	br    *bufio.Reader
	stop  func() bool // ends the context.AfterFunc that closes c
	call  []byte      // the body of the last call
	req   []byte      // the last request
	reply []byte      // the body of the last reply, when it had a length
	id    int
}

// pollEndpoint is where pollers send their calls, and what every call carries.
type pollEndpoint struct {
	addr   string      // host:port to dial
	tls    *tls.Config // nil: plain HTTP
	head   []byte      // the request line and the headers before Content-Length
	query  []byte      // the filter, as JSON, or nil
	wait   time.Duration
	dialer net.Dialer
}

func newPollEndpoint(t Target, version, query string, wait time.Duration) (*pollEndpoint, error) {
	base, err := client.NormalizeNode(t.URL)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(base)
	if err != nil {
		return nil, err
	}
	ep := &pollEndpoint{addr: u.Host, wait: wait, dialer: net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}}
	if u.Port() == "" {
		port := "80"
		if u.Scheme == "https" {
			port = "443"
		}
		ep.addr = net.JoinHostPort(u.Hostname(), port)
	}
	if u.Scheme == "https" {
		cfg, err := client.TLSConfig(t.CAFile, t.Insecure)
		if err != nil {
			return nil, err
		}
		if cfg == nil {
			cfg = &tls.Config{}
		}
		cfg = cfg.Clone()
		cfg.ServerName = u.Hostname()
		cfg.NextProtos = []string{"http/1.1"}
		ep.tls = cfg
	}
	h := "POST " + u.EscapedPath() + "/ HTTP/1.1\r\nHost: " + u.Host + "\r\nUser-Agent: " + userAgent(version) +
		"\r\nContent-Type: application/json\r\n"
	if t.Token != "" {
		h += "Authorization: Bearer " + t.Token + "\r\n"
	}
	ep.head = []byte(h)
	if query != "" {
		ep.query, _ = json.Marshal(query)
	}
	return ep, nil
}

func (ep *pollEndpoint) dial(ctx context.Context) (*pollConn, error) {
	c, err := ep.dialer.DialContext(ctx, "tcp", ep.addr)
	if err != nil {
		return nil, err
	}
	if ep.tls != nil {
		tc := tls.Client(c, ep.tls)
		if err := tc.HandshakeContext(ctx); err != nil {
			c.Close()
			return nil, err
		}
		c = tc
	}
	rw := rawIO(c)
	if rw == nil {
		rw = c
	}
	pc := &pollConn{ep: ep, c: c, rw: rw, br: bufio.NewReaderSize(rw, 2048)}
	pc.stop = context.AfterFunc(ctx, func() { c.Close() })
	return pc, nil
}

// arrived is when the last reply read reached the socket, in Unix nanoseconds; 0 when not
// known.
func (pc *pollConn) arrived() int64 {
	if pc == nil {
		return 0
	}
	if a, ok := pc.rw.(interface{ arrived() int64 }); ok {
		return a.arrived()
	}
	return 0
}

func (pc *pollConn) close() {
	pc.stop()
	pc.c.Close()
}

// send writes a call for the first item after the cursor after.
func (pc *pollConn) send(after string) error {
	pc.id++
	b := append(pc.call[:0], `{"jsonrpc":"2.0","id":`...)
	b = strconv.AppendInt(b, int64(pc.id), 10)
	b = append(b, `,"method":"events","params":{"maxItems":1`...)
	if after != "" {
		b = append(b, `,"after":`...)
		b = strconv.AppendQuote(b, after)
	}
	b = append(b, `,"waitTime":`...)
	b = strconv.AppendInt(b, int64(pc.ep.wait), 10)
	if pc.ep.query != nil {
		b = append(append(append(b, `,"filter":{"query":`...), pc.ep.query...), '}')
	}
	pc.call = append(b, "}}"...)
	r := append(pc.req[:0], pc.ep.head...)
	r = append(r, "Content-Length: "...)
	r = strconv.AppendInt(r, int64(len(pc.call)), 10)
	r = append(r, "\r\n\r\n"...)
	pc.req = append(r, pc.call...)
	_, err := pc.rw.Write(pc.req)
	return err
}

// errRefused is the node's busy error (-32000): too many waiting readers.
type errRefused struct{ msg string }

func (e *errRefused) Error() string { return e.msg }

// receive reads the reply to the last call and returns the cursor of its newest item; ""
// when it has none. keep is false when the node closes the connection after it.
func (pc *pollConn) receive() (newest string, keep bool, err error) {
	status, length, chunked, keep, err := pc.readHead()
	if err != nil {
		return "", false, err
	}
	var body []byte
	switch {
	case chunked:
		body, err = io.ReadAll(httputil.NewChunkedReader(pc.br))
		if err == nil {
			// The trailer section: lines up to an empty one.
			for {
				line, lerr := pc.br.ReadSlice('\n')
				if lerr != nil {
					err = lerr
					break
				}
				if len(bytes.TrimSpace(line)) == 0 {
					break
				}
			}
		}
	case length >= 0:
		if length > 64<<20 {
			return "", false, fmt.Errorf("a reply of %d bytes", length)
		}
		if cap(pc.reply) < length {
			pc.reply = make([]byte, length)
		}
		body = pc.reply[:length]
		_, err = io.ReadFull(pc.br, body)
	default:
		body, err = io.ReadAll(pc.br)
		keep = false
	}
	if err != nil {
		return "", false, err
	}
	if status != 200 {
		return "", false, fmt.Errorf("the node answered HTTP %d: %.200s", status, body)
	}
	if cur, ok := firstCursor(body); ok {
		return cur, keep, nil
	}
	if e := gjson.GetBytes(body, "error"); e.Exists() {
		msg := fmt.Sprintf("the node answered %s", e.Raw)
		if e.Get("code").Int() == -32000 {
			return "", keep, &errRefused{msg}
		}
		return "", keep, errors.New(msg)
	}
	items := gjson.GetBytes(body, "result.items")
	if !items.IsArray() {
		return "", false, fmt.Errorf("not a reply of the events method: %.200s", body)
	}
	n := items.Get("#").Int()
	if n == 0 {
		return "", keep, nil
	}
	i := int64(0)
	if gjson.GetBytes(body, "result.order").String() == "asc" {
		i = n - 1
	}
	return items.Get(strconv.FormatInt(i, 10) + ".cursor").String(), keep, nil
}

// readHead reads a reply's status line and headers.
func (pc *pollConn) readHead() (status, length int, chunked, keep bool, err error) {
	line, err := pc.br.ReadSlice('\n')
	if err != nil {
		return 0, 0, false, false, err
	}
	proto, rest, _ := bytes.Cut(line, []byte(" "))
	code, _, _ := bytes.Cut(rest, []byte(" "))
	if status, err = strconv.Atoi(string(bytes.TrimSpace(code))); err != nil || !bytes.HasPrefix(proto, []byte("HTTP/1.")) {
		return 0, 0, false, false, fmt.Errorf("not an HTTP reply: %q", line)
	}
	keep = string(proto) == "HTTP/1.1"
	length = -1
	for {
		line, err = pc.br.ReadSlice('\n')
		if err != nil {
			return 0, 0, false, false, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			return status, length, chunked, keep, nil
		}
		name, val, _ := bytes.Cut(line, []byte(":"))
		val = bytes.TrimSpace(val)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(val)); err != nil || length < 0 {
				return 0, 0, false, false, fmt.Errorf("bad Content-Length %q", val)
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			chunked = bytes.EqualFold(val, []byte("chunked"))
		case bytes.EqualFold(name, []byte("Connection")):
			if bytes.EqualFold(val, []byte("close")) {
				keep = false
			} else if bytes.EqualFold(val, []byte("keep-alive")) {
				keep = true
			}
		}
	}
}

// firstCursor reads the reply of a one-item call as an evtctl node writes it —
// {"jsonrpc":"2.0","id":…,"result":{"items":[{"cursor":"…",… or {"items":[],… — without
// parsing the rest; false for any other reply, which is then parsed whole.
func firstCursor(body []byte) (string, bool) {
	const head, items, item = `{"jsonrpc":"2.0","id":`, `,"result":{"items":[`, `{"cursor":"`
	if !bytes.HasPrefix(body, []byte(head)) {
		return "", false
	}
	i := bytes.IndexByte(body[len(head):], ',')
	if i < 0 {
		return "", false
	}
	rest := body[len(head)+i:]
	if !bytes.HasPrefix(rest, []byte(items)) {
		return "", false
	}
	rest = rest[len(items):]
	switch {
	case bytes.HasPrefix(rest, []byte("]")):
		return "", true
	case bytes.HasPrefix(rest, []byte(item)):
		rest = rest[len(item):]
		if j := bytes.IndexByte(rest, '"'); j == 33 && !bytes.Contains(body[max(len(body)-48, 0):], []byte(`"order":"asc"`)) {
			return string(rest[:j]), true
		}
	}
	return "", false
}
