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
	"github.com/evtctl/evtctl/pkg/wire"
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
	h := "POST " + u.EscapedPath() + wire.PathRPC + " HTTP/1.1\r\nHost: " + u.Host + "\r\nUser-Agent: " + userAgent(version) +
		"\r\nContent-Type: " + wire.MediaJSON + "\r\n"
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
	pc.call, pc.req = pc.ep.appendRequest(pc.call[:0], pc.req[:0], pc.id, after)
	_, err := pc.rw.Write(pc.req)
	return err
}

// A call for one item, as appendRequest encodes it:
// {"jsonrpc":"2.0","id":N,"method":"events","params":{"maxItems":1,"after":"C","waitTime":NS,"filter":{"query":Q}}}.
const (
	callHead   = `{"` + wire.KeyJSONRPC + `":"` + wire.Version + `","` + wire.KeyID + `":`
	callParams = `,"` + wire.KeyMethod + `":"` + wire.Method + `","` + wire.KeyParams + `":{"` + wire.ParamMaxItems + `":1`
	callAfter  = `,"` + wire.ParamAfter + `":`
	callWait   = `,"` + wire.ParamWaitTime + `":`
	callQuery  = `,"` + wire.ParamFilter + `":{"` + wire.ParamQuery + `":`
)

// appendRequest appends the body of call id, for the first item after the cursor after, to
// call, and the whole request to req.
func (ep *pollEndpoint) appendRequest(call, req []byte, id int, after string) ([]byte, []byte) {
	b := append(call, callHead...)
	b = strconv.AppendInt(b, int64(id), 10)
	b = append(b, callParams...)
	if after != "" {
		b = append(b, callAfter...)
		b = strconv.AppendQuote(b, after)
	}
	b = append(b, callWait...)
	b = strconv.AppendInt(b, int64(ep.wait), 10)
	if ep.query != nil {
		b = append(append(append(b, callQuery...), ep.query...), '}')
	}
	b = append(b, "}}"...)
	r := append(req, ep.head...)
	r = append(r, "Content-Length: "...)
	r = strconv.AppendInt(r, int64(len(b)), 10)
	r = append(r, "\r\n\r\n"...)
	return b, append(r, b...)
}

// errRefused is the node's busy error (wire.CodeBusy): too many waiting readers.
type errRefused struct{ msg string }

func (e *errRefused) Error() string { return e.msg }

// receive reads the reply to the last call and returns the cursor of its newest item; ""
// when it has none. keep is false when the node closes the connection after it.
func (pc *pollConn) receive() (newest string, keep bool, err error) {
	var h replyHead
	for want := 1; ; {
		// One more byte than was there before: Peek waits for input, not for a size.
		if _, err := pc.br.Peek(want); err != nil {
			if err == bufio.ErrBufferFull {
				err = errors.New("reply headers too long")
			}
			return "", false, err
		}
		b, _ := pc.br.Peek(pc.br.Buffered())
		var size int
		var ok bool
		if h, size, ok, err = parseReplyHead(b); err != nil {
			return "", false, err
		}
		if ok {
			_, _ = pc.br.Discard(size)
			break
		}
		want = len(b) + 1
	}
	var body []byte
	switch {
	case h.chunked:
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
	case h.length >= 0:
		if cap(pc.reply) < h.length {
			pc.reply = make([]byte, h.length)
		}
		body = pc.reply[:h.length]
		_, err = io.ReadFull(pc.br, body)
	default:
		body, err = io.ReadAll(pc.br)
		h.keep = false
	}
	if err != nil {
		return "", false, err
	}
	newest, err = replyCursor(h.status, body)
	return newest, h.keep && err == nil, err
}

// replyHead is what a reply's head says.
type replyHead struct {
	status  int
	length  int // -1: not given
	chunked bool
	keep    bool // the connection stays open after the reply
}

// maxReplyHead bounds a reply's status line and headers.
const maxReplyHead = 16 << 10

// parseReplyHead reads a reply's status line and headers at the start of b: their size and
// true once b holds them whole.
func parseReplyHead(b []byte) (h replyHead, size int, ok bool, err error) {
	end := bytes.Index(b, []byte("\r\n\r\n"))
	if end < 0 {
		if len(b) > maxReplyHead {
			return h, 0, false, errors.New("reply headers too long")
		}
		return h, 0, false, nil
	}
	lines := bytes.Split(b[:end], []byte("\r\n"))
	proto, rest, _ := bytes.Cut(lines[0], []byte(" "))
	code, _, _ := bytes.Cut(rest, []byte(" "))
	if h.status, err = strconv.Atoi(string(code)); err != nil || !bytes.HasPrefix(proto, []byte("HTTP/1.")) {
		return h, 0, false, fmt.Errorf("not an HTTP reply: %q", lines[0])
	}
	h.keep = string(proto) == "HTTP/1.1"
	h.length = -1
	for _, line := range lines[1:] {
		name, val, _ := bytes.Cut(line, []byte(":"))
		val = bytes.TrimSpace(val)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if h.length, err = strconv.Atoi(string(val)); err != nil || h.length < 0 || h.length > 64<<20 {
				return h, 0, false, fmt.Errorf("bad Content-Length %q", val)
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			h.chunked = bytes.EqualFold(val, []byte("chunked"))
		case bytes.EqualFold(name, []byte("Connection")):
			if bytes.EqualFold(val, []byte("close")) {
				h.keep = false
			} else if bytes.EqualFold(val, []byte("keep-alive")) {
				h.keep = true
			}
		}
	}
	return h, end + 4, true, nil
}

// replyCursor reads the reply of a call for one item: the cursor of its newest item, "" when
// it has none.
func replyCursor(status int, body []byte) (string, error) {
	if status != 200 {
		return "", fmt.Errorf("the node answered HTTP %d: %.200s", status, body)
	}
	if cur, ok := firstCursor(body); ok {
		return cur, nil
	}
	if e := gjson.GetBytes(body, wire.KeyError); e.Exists() {
		msg := fmt.Sprintf("the node answered %s", e.Raw)
		if e.Get(wire.KeyCode).Int() == wire.CodeBusy {
			return "", &errRefused{msg}
		}
		return "", errors.New(msg)
	}
	items := gjson.GetBytes(body, wire.KeyResult+"."+wire.KeyItems)
	if !items.IsArray() {
		return "", fmt.Errorf("not a reply of the events method: %.200s", body)
	}
	n := items.Get("#").Int()
	if n == 0 {
		return "", nil
	}
	i := int64(0)
	if gjson.GetBytes(body, wire.KeyResult+"."+wire.KeyOrder).String() == wire.OrderAsc {
		i = n - 1
	}
	return items.Get(strconv.FormatInt(i, 10) + "." + wire.KeyCursor).String(), nil
}

// firstCursor reads the reply of a one-item call as an evtctl node writes it —
// {"jsonrpc":"2.0","id":…,"result":{"items":[{"cursor":"…",… or {"items":[],… — without
// parsing the rest; false for any other reply, which is then parsed whole.
func firstCursor(body []byte) (string, bool) {
	const head, items, item = callHead, `,"` + wire.KeyResult + `":{"` + wire.KeyItems + `":[`, `{"` + wire.KeyCursor + `":"`
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
		if j := bytes.IndexByte(rest, '"'); j == 33 && !bytes.Contains(body[max(len(body)-48, 0):], []byte(`"`+wire.KeyOrder+`":"`+wire.OrderAsc+`"`)) {
			return string(rest[:j]), true
		}
	}
	return "", false
}
