package client

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/evtctl/evtctl/internal/jsonspace"
	"github.com/evtctl/evtctl/internal/peer"
	"github.com/evtctl/evtctl/internal/retry"
	"github.com/evtctl/evtctl/internal/tlsfiles"
	"github.com/evtctl/evtctl/pkg/cursor"
	"github.com/evtctl/evtctl/pkg/filter"
	"github.com/evtctl/evtctl/pkg/wire"
)

// rpcNode calls the events method of one node over HTTP: an evtctl node or a Tendermint
// node. Its source (eventsSource) pages it.
type rpcNode struct {
	endpoint string // JSON-RPC endpoint: the node's root path
	base     string
	token    string
	ua       string
	hc       *http.Client
	id       atomic.Int64
	kind     atomic.Int32           // a Kind, learned from the node's replies
	stream   atomic.Pointer[string] // the path of the node's stream, when it advertises one
	answered atomic.Bool            // the node has answered the events method in this process
}

// Answered reports whether the node has answered a call of the events method with a result.
func (c *rpcNode) Answered() bool { return c.answered.Load() }

// url is the node's base URL as given, password included: for other sources that take the
// node over (see Client.detect).
func (c *rpcNode) url() string { return strings.TrimSuffix(c.endpoint, "/") }

// Kind reports what the client has learned of its node so far.
func (c *rpcNode) Kind() Kind { return Kind(c.kind.Load()) }

// BeforeThrough is the exclusive `before` bound of a request that must include the item at
// end: the next cursor on a node that compares cursors in full (evtctl's), a later time on
// one that compares them by time alone (Tendermint) or that the client does not know yet.
// With a time bound, items after end that share its time come back too; the caller drops
// them.
func (c *rpcNode) BeforeThrough(end cursor.Cursor) cursor.Cursor {
	if c.Kind() == KindEvtctl {
		return end.Next()
	}
	return cursor.TimeBoundAfter(end)
}

// CheckQuery reports, as a *QueryError, a query that the node would refuse, as far as the
// client knows the node: against a Tendermint node, a query using evtctl's extensions (OR,
// NOT, parentheses, MATCHES) or one of only spaces. Nothing is checked before the client
// knows the node's kind.
func (c *rpcNode) CheckQuery(q string) error {
	if q == "" || c.Kind() != KindTendermint {
		return nil
	}
	if err := filter.CheckTendermint(q); err != nil {
		return &QueryError{Query: q, Err: err}
	}
	return nil
}

// newRPCNode returns a caller of the events method of the HTTP node opts.Node.
func newRPCNode(opts Options) (*rpcNode, error) {
	base, err := NormalizeNode(opts.Node)
	if err != nil {
		return nil, err
	}
	hc := opts.HTTPClient
	if hc == nil {
		if hc, err = HTTPClient(opts.CAFile, opts.Insecure, 16); err != nil {
			return nil, err
		}
	}
	ua := cmp.Or(opts.UserAgent, "evtctl")
	display := base
	if u, err := url.Parse(base); err == nil {
		display = u.Redacted()
	}
	return &rpcNode{endpoint: base + "/", base: display, token: opts.Token, ua: ua, hc: hc}, nil
}

// HTTPClient is the HTTP client of a log reached over HTTP: Go's default transport keeping
// idle connections to the node for that many requests in flight, reading in large pieces
// (pages run to megabytes), with no bound on waiting for a reply's headers (long-polls
// hold them; a request's context bounds it), trusting as caFile and insecure say (see
// TLSConfig).
func HTTPClient(caFile string, insecure bool, idle int) (*http.Client, error) {
	cfg, err := TLSConfig(caFile, insecure)
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = idle
	tr.ReadBufferSize = 256 << 10
	tr.ResponseHeaderTimeout = 0
	tr.TLSClientConfig = cfg
	return &http.Client{Transport: tr}, nil
}

// TLSConfig trusts the CAs in caFile beside the system's (when given) or skips verification
// (insecure); nil when neither is asked for, which means Go's defaults.
func TLSConfig(caFile string, insecure bool) (*tls.Config, error) {
	if caFile == "" && !insecure {
		return nil, nil
	}
	return tlsfiles.Files{CAFile: caFile, Insecure: insecure}.Config()
}

// NormalizeNode turns a node address into a base URL without a trailing slash.
func NormalizeNode(node string) (string, error) {
	given := strings.TrimSpace(node)
	if given == "" {
		return "", errors.New("no node given")
	}
	if d, scheme := driverFor(given); scheme != "" && scheme != "http" && scheme != "https" {
		if d == nil {
			return "", fmt.Errorf("%q is not an http(s) URL or host:port, nor an address of another log evtctl reads (%s)", given, otherSchemes())
		}
		return strings.TrimRight(given, "/"), nil // the source checks the rest when it opens
	}
	node = given
	if !strings.Contains(node, "://") {
		node = "http://" + node
	}
	u, err := url.Parse(node)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", fmt.Errorf("%q is not an http(s) URL or host:port", given)
	}
	u.RawQuery, u.Fragment = "", ""
	return strings.TrimRight(u.String(), "/"), nil
}

// Node is the base URL the client talks to, with any password in it redacted: it is for
// messages and checkpoint files.
func (c *rpcNode) Node() string { return c.base }

// Request is one call of the events method.
type Request struct {
	Query     string
	MaxItems  int
	After     string
	Before    string
	Wait      time.Duration // 0: the node's default
	Ascending bool          // ask for evtctl's ascending order; Reply.Ascending says if it was honoured

	reuse bool // read the reply into a pooled buffer, to be given back with Reply.release
}

// Reply is the result of the events method (a wire.Reply), its items as the client keeps
// them.
type Reply struct {
	Items []Item `json:"items"`
	wire.PageEnd

	body   *[]byte // pooled reply buffer the items alias, when the request asked for reuse
	stream string  // the node's stream path, from the reply's headers
}

// Ascending reports whether the node returned the items oldest first.
func (r *Reply) Ascending() bool { return r.Order == wire.OrderAsc }

// bodies holds reply buffers for reuse (ReuseMemory): a replay reads thousands of pages of
// up to megabytes, and allocating each anew made garbage collection a large share of the
// client's work.
var bodies sync.Pool // of *[]byte

// release gives a pooled reply buffer back; the reply's items must not be used after.
func (r *Reply) release() {
	if r != nil && r.body != nil {
		if poisonReleased {
			clear(*r.body) // a use after release then reads zeros, not old data
		}
		bodies.Put(r.body)
		r.body, r.Items = nil, nil
	}
}

// Item is one item of a log: its cursor, its event's name and its data (a wire.Item). Raw is
// the whole item object as the node sent it, byte for byte; sources that build their items
// leave it empty, and renderers build the object from the fields.
type Item struct {
	wire.Item
	Raw json.RawMessage `json:"-"`
	// Compact reports that Raw is known to hold no insignificant whitespace (its source
	// built it so), which a renderer writing it as it is then need not check.
	Compact bool `json:"-"`
	// Pos is the position right after the item, where it is not the cursor (a log of
	// partitions); see PosOf.
	Pos string `json:"-"`
	// Time is when the log stamped the item, where its cursor holds no time (a chain's
	// item: its block's time); zero otherwise. Renderers show it where an item that is no
	// CloudEvent has no time of its own.
	Time time.Time `json:"-"`
}

// UnmarshalJSON keeps the raw bytes of the item beside its fields.
func (it *Item) UnmarshalJSON(b []byte) error {
	type plain Item
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*it = Item(p)
	it.Raw = append(json.RawMessage(nil), b...)
	return nil
}

// RPCError is an error answered by the node in the JSON-RPC envelope.
type RPCError = wire.Error

// HTTPError is a reply whose HTTP status is not 200.
type HTTPError struct {
	Status     int
	Message    string        // what the body says, in one line (see Page)
	RetryAfter time.Duration // from Retry-After, 0 when absent
	// Page: the body was a web page (HTML) or other text, not JSON as a node's own
	// refusals are, nor empty.
	Page bool

	wantsTLS bool // the reply says plain HTTP reached a port that takes HTTPS
}

func (e *HTTPError) Error() string {
	msg := strings.TrimSpace(e.Message)
	switch {
	case e.Page:
		return fmt.Sprintf("node answered %d (a web page: %q)", e.Status, msg)
	case msg == "":
		msg = http.StatusText(e.Status)
	}
	return fmt.Sprintf("node answered %d: %s", e.Status, msg)
}

// describe is the status with its text and what the body said: `501 Not Implemented (a web
// page: "Error response …")`.
func (e *HTTPError) describe() string {
	s := strconv.Itoa(e.Status)
	if t := http.StatusText(e.Status); t != "" {
		s += " " + t
	}
	msg := strings.TrimSpace(e.Message)
	switch {
	case e.Page && (msg == s || msg == http.StatusText(e.Status)):
		return s + " (a web page)"
	case msg == "" || msg == http.StatusText(e.Status) || msg == s:
		return s
	case e.Page:
		return fmt.Sprintf("%s (a web page: %q)", s, msg)
	}
	return s + ": " + msg
}

// ContactKind says why a node that has not answered yet cannot be used.
type ContactKind int

// The kinds of ContactError.
const (
	NoNode         ContactKind = iota + 1 // nothing listens at the address (connection refused)
	NoHost                                // the host name does not resolve
	TLSMismatch                           // http:// against a TLS port, or https:// against plain HTTP or something else
	BadCertificate                        // the node's certificate could not be verified, or the handshake failed
	NotEventsAPI                          // something answered, but not the events method
)

// ContactError is a failure to reach a node that has not answered the events method yet in
// this process, of a kind that waiting does not mend: nothing listens at the address, the
// host name does not resolve, TLS does not fit, or what answers does not serve the events
// method (a web page, a 404, a JSON reply of another kind). Retryable reports false for it:
// retrying is for a node that has answered before and fails for a while (a restart).
type ContactError struct {
	Node string // the node's base URL, without a password
	Kind ContactKind
	Err  error // the failure: a transport error, an *HTTPError, an *RPCError or a *DecodeError
}

func (e *ContactError) Error() string {
	switch e.Kind {
	case NoNode:
		return fmt.Sprintf("no node answers at %s (connection refused)", e.Node)
	case NoHost:
		var de *net.DNSError
		if errors.As(e.Err, &de) {
			return fmt.Sprintf("cannot find the host of %s: no such host %q", e.Node, de.Name)
		}
		return fmt.Sprintf("cannot find the host of %s: %v", e.Node, e.Err)
	case TLSMismatch:
		var he *HTTPError
		switch {
		case errors.As(e.Err, &he):
			return fmt.Sprintf("%s is an HTTPS port: it answered plain HTTP with %s", e.Node, he.describe())
		case peer.Classify(e.Err) == peer.PlainHTTP:
			return fmt.Sprintf("%s answers in plain HTTP, not HTTPS", e.Node)
		}
		return fmt.Sprintf("%s does not answer in TLS: %v", e.Node, unwrapURL(e.Err))
	case BadCertificate:
		return fmt.Sprintf("TLS with %s failed: %v", e.Node, unwrapURL(e.Err))
	case NotEventsAPI:
		var he *HTTPError
		var re *RPCError
		switch {
		case errors.As(e.Err, &he):
			return fmt.Sprintf("%s does not serve the events API: it answered %s", e.Node, he.describe())
		case errors.As(e.Err, &re) && re.Code == wire.CodeMethodNotFound:
			return fmt.Sprintf("%s does not serve the events API: it has no method %q (%s)", e.Node, wire.Method, re.Error())
		}
		return fmt.Sprintf("%s does not serve the events API: %v", e.Node, e.Err)
	}
	return e.Err.Error()
}

func (e *ContactError) Unwrap() error { return e.Err }

// unwrapURL drops Go's "Post "url": " prefix from a transport error.
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// firstContact turns a failure of a node that has not answered yet into a *ContactError
// when waiting would not mend it, and returns it unchanged otherwise: transport failures
// that may pass (a reset, a timeout), a busy node, and 429, 500, 502, 503 and 504 replies in
// JSON or without a body, which a node (or a proxy in front of one) gives while it cannot
// serve for a moment.
func (c *rpcNode) firstContact(err error) error {
	var (
		he *HTTPError
		re *RPCError
		de *DecodeError
	)
	kind := ContactKind(0)
	switch {
	case errors.As(err, &he):
		switch {
		case he.Status == http.StatusUnauthorized || he.Status == http.StatusForbidden:
		case he.wantsTLS:
			kind = TLSMismatch
		case he.Page:
			kind = NotEventsAPI
		case he.Status == http.StatusTooManyRequests || he.Status >= 500 && he.Status != http.StatusNotImplemented && he.Status != http.StatusHTTPVersionNotSupported:
		default:
			kind = NotEventsAPI // 404, 405, 501, …: not the events method's endpoint
		}
	case errors.As(err, &re):
		switch re.Code {
		case wire.CodeMethodNotFound, wire.CodeInvalidRequest, wire.CodeParseError: // no such method; our call is not a request to it
			kind = NotEventsAPI
		}
	case errors.As(err, &de):
		kind = NotEventsAPI
	default:
		switch peer.Classify(err) {
		case peer.NoListener:
			kind = NoNode
		case peer.NoSuchHost:
			kind = NoHost
		case peer.PlainHTTP, peer.NotTLS:
			kind = TLSMismatch
		case peer.Certificate, peer.TLSFailure:
			kind = BadCertificate
		}
	}
	if kind == 0 {
		return err
	}
	return &ContactError{Node: c.base, Kind: kind, Err: err}
}

// Retryable reports whether an error from Events is worth retrying: transport failures,
// 5xx, 429 and a busy node. A bad query, a bad cursor, a refused token, a *ContactError (a
// node that has not answered yet and cannot be used) and a *FinalError are not. An error
// of a source that has a method Retryable() bool says for itself.
func Retryable(err error) bool {
	var ce *ContactError
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ce) {
		return false
	}
	var own interface{ Retryable() bool }
	if errors.As(err, &own) {
		return own.Retryable()
	}
	var he *HTTPError
	if errors.As(err, &he) {
		return he.Status >= 500 || he.Status == http.StatusTooManyRequests
	}
	var re *RPCError
	if errors.As(err, &re) {
		return re.Code == wire.CodeBusy // evtctl: too many waiting readers, or the log unavailable for now
	}
	var de *DecodeError
	var qe *QueryError
	if errors.As(err, &de) || errors.As(err, &qe) {
		return false
	}
	return true // transport errors: refused, reset, EOF, timeouts
}

// FinalError is a failure that a source knows waiting will not mend (a refused password,
// a key of another type, a server that lacks what the source needs): Retryable reports
// false for it. Its message is Err's.
type FinalError struct{ Err error }

func (e *FinalError) Error() string { return e.Err.Error() }
func (e *FinalError) Unwrap() error { return e.Err }

// Retryable is false: waiting will not mend it.
func (e *FinalError) Retryable() bool { return false }

// DecodeError is a reply that could not be understood.
type DecodeError struct {
	Err  error
	Body string
}

func (e *DecodeError) Error() string {
	if e.Body == "" {
		return fmt.Sprintf("the node's reply is not an events result: %v (an empty body)", e.Err)
	}
	return fmt.Sprintf("the node's reply is not an events result: %v (reply begins %q)", e.Err, e.Body)
}
func (e *DecodeError) Unwrap() error { return e.Err }

// retryAfterOf returns the delay a node asked for, if any.
func retryAfterOf(err error) time.Duration {
	var he *HTTPError
	if errors.As(err, &he) {
		return he.RetryAfter
	}
	return 0
}

// Events calls the events method once. The request's context bounds the call; a long-poll
// is given its wait plus a margin. Until the node has answered once, a failure that waiting
// does not mend is a *ContactError.
func (c *rpcNode) Events(ctx context.Context, req Request) (*Reply, error) {
	r, err := c.events(ctx, req)
	switch {
	case err == nil:
		c.answered.Store(true)
	case !c.answered.Load() && ctx.Err() == nil:
		err = c.firstContact(err)
	}
	return r, err
}

func (c *rpcNode) events(ctx context.Context, req Request) (*Reply, error) {
	// A Tendermint node ignores order, evtctl's extension.
	p := &wire.Params{MaxItems: req.MaxItems, After: req.After, Before: req.Before, WaitTime: req.Wait}
	if req.Query != "" {
		p.Filter = &wire.Filter{Query: req.Query}
	}
	if req.Ascending {
		p.Order = wire.OrderAsc
	}
	id := strconv.AppendInt(nil, c.id.Add(1), 10)
	body, err := json.Marshal(wire.Request[*wire.Params]{JSONRPC: wire.Version, ID: id, Method: wire.Method, Params: p})
	if err != nil {
		return nil, err
	}
	// The node clamps waits to its own maximum (30s by default); allow for that and transit.
	limit := max(req.Wait, 30*time.Second) + 15*time.Second
	callCtx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	hr, err := http.NewRequestWithContext(callCtx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Content-Type", wire.MediaJSON)
	hr.Header.Set("User-Agent", c.ua)
	if c.token != "" {
		hr.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(hr)
	if err != nil {
		return nil, transportError(ctx, err)
	}
	defer resp.Body.Close()
	var buf *[]byte
	if req.reuse && resp.StatusCode == http.StatusOK && resp.ContentLength > 0 && resp.ContentLength <= 64<<20 {
		buf, _ = bodies.Get().(*[]byte)
		if buf == nil || int64(cap(*buf)) < resp.ContentLength {
			b := make([]byte, resp.ContentLength)
			buf = &b
		}
		*buf = (*buf)[:resp.ContentLength]
		if _, err := io.ReadFull(resp.Body, *buf); err != nil {
			bodies.Put(buf)
			return nil, transportError(ctx, err)
		}
		r, err := decodeReply(resp, *buf)
		if err != nil {
			bodies.Put(buf)
			return nil, err
		}
		r.body = buf
		r.stream = resp.Header.Get(wire.HeaderStream)
		c.learn(req, r)
		return r, nil
	}
	data, err := readBody(resp)
	if err != nil {
		return nil, transportError(ctx, err)
	}
	r, err := decodeReply(resp, data)
	if err == nil {
		r.stream = resp.Header.Get(wire.HeaderStream)
		c.learn(req, r)
	}
	return r, err
}

// learn notes the node's kind from a reply to req: only a node with evtctl's extensions
// answers a request for ascending order with "order":"asc".
func (c *rpcNode) learn(req Request, r *Reply) {
	if r.stream != "" && r.Ascending() {
		if p := c.stream.Load(); p == nil || *p != r.stream {
			path := strings.Clone(r.stream)
			c.stream.Store(&path)
		}
	}
	switch {
	case !req.Ascending:
	case r.Ascending():
		c.kind.Store(int32(KindEvtctl))
	default:
		c.kind.Store(int32(KindTendermint))
	}
}

// readBody reads a reply in one allocation when its length is known (pages of a replay run
// to hundreds of kilobytes; growing a buffer for each costs copies and garbage).
func readBody(resp *http.Response) ([]byte, error) {
	if n := resp.ContentLength; n > 0 && n <= 64<<20 {
		b := make([]byte, n)
		_, err := io.ReadFull(resp.Body, b)
		return b, err
	}
	return io.ReadAll(resp.Body)
}

// transportError keeps the cause but drops Go's verbose "Post "url": " prefix. ctx is the
// caller's: when it is still live, a timeout is the call's own limit (or the HTTP client's),
// a node not answering, and must not read as the caller's deadline, which Retryable refuses.
func transportError(ctx context.Context, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		var ne net.Error
		if errors.As(ue.Err, &ne) && ne.Timeout() {
			if ctx.Err() == nil {
				return fmt.Errorf("node did not answer in time: %v", ue.Err)
			}
			return fmt.Errorf("node did not answer in time: %w", ue.Err)
		}
		return fmt.Errorf("cannot reach the node: %w", ue.Err)
	}
	if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("node did not answer in time: %v", err) // while the body was read
	}
	return err
}

func decodeReply(resp *http.Response, data []byte) (*Reply, error) {
	if resp.StatusCode != http.StatusOK {
		form := peer.FormOf(data)
		page := form == peer.HTMLBody || form == peer.TextBody
		max := 200 // a node's own message
		if page {
			max = 100 // the start of a page is enough to tell what answered
		}
		he := &HTTPError{Status: resp.StatusCode, Message: peer.Text(data, max), Page: page}
		he.RetryAfter = parseRetryAfter(resp.Header.Get(wire.HeaderRetryAfter), time.Now())
		he.wantsTLS = peer.WantsTLS(resp.StatusCode, data)
		return nil, he
	}
	return parseReply(data)
}

// parseReply decodes a JSON-RPC reply of the events method without copying: items' fields
// and Raw alias data, which the caller must not change afterwards. The body is validated
// once (gjson.Valid), then walked once: nested iteration with gjson would scan each item
// three or four times to find where values end. (encoding/json spent about 13 µs per item
// here, most of a replay's time.)
func parseReply(data []byte) (*Reply, error) {
	bad := func(msg string) error { return &DecodeError{Err: errors.New(msg), Body: prefix(data, 80)} }
	if !gjson.ValidBytes(data) {
		return nil, bad("not valid JSON")
	}
	w := walker{b: data}
	w.ws()
	if w.b[w.i] != '{' {
		return nil, bad("not a JSON object")
	}
	// The last member of a name wins, as with any JSON object read into a struct.
	var res, rpcErr span
	w.object(func(key []byte) {
		switch string(key) {
		case wire.KeyResult:
			res = w.skip()
		case wire.KeyError:
			rpcErr = w.skip()
		default:
			w.skip()
		}
	})
	if v := rpcErr.of(data); v != nil && string(v) != "null" {
		var re RPCError
		if err := json.Unmarshal(v, &re); err != nil {
			return nil, bad("an error member that is not a JSON-RPC error")
		}
		return nil, &re
	}
	if v := res.of(data); v == nil || v[0] != '{' {
		return nil, bad("no result and no error")
	}
	r := &Reply{}
	var err error
	w.i = res.start
	w.object(func(key []byte) {
		if err != nil {
			w.skip()
			return
		}
		switch string(key) {
		case wire.KeyItems:
			switch w.b[w.i] {
			case 'n': // null
				w.skip()
			case '[':
				r.Items = []Item{}
				w.array(func() {
					if err != nil {
						w.skip()
						return
					}
					it, ok := w.item()
					if !ok {
						err = bad("an item is not an object with a string cursor")
						return
					}
					r.Items = append(r.Items, it)
				})
			default:
				err = bad("items is not an array")
				w.skip()
			}
		case wire.KeyMore:
			r.More = string(w.skip().of(data)) == "true"
		case wire.KeyOldest:
			r.Oldest = stringOf(w.skip().of(data))
		case wire.KeyNewest:
			r.Newest = stringOf(w.skip().of(data))
		case wire.KeyResume:
			r.Resume = stringOf(w.skip().of(data))
		case wire.KeyOrder:
			r.Order = stringOf(w.skip().of(data))
		default:
			w.skip()
		}
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// item reads one element of items: an object with a string cursor, or not an item.
func (w *walker) item() (Item, bool) {
	if w.b[w.i] != '{' {
		w.skip()
		return Item{}, false
	}
	start := w.i
	var it Item
	hasCursor := false
	w.object(func(key []byte) {
		v := w.skip().of(w.b)
		switch string(key) {
		case wire.KeyCursor:
			it.Cursor, hasCursor = stringOf(v), v[0] == '"'
		case wire.KeyEvent:
			it.Event = stringOf(v)
		case wire.KeyData:
			it.Data = v
		}
	})
	it.Raw = w.b[start:w.i]
	return it, hasCursor
}

// span is where a value lies in the body; the zero span is no value.
type span struct{ start, end int }

func (s span) of(b []byte) []byte {
	if s.end == 0 {
		return nil
	}
	return b[s.start:s.end]
}

// stringOf is the text of a JSON string value, aliasing the body when it has no escapes;
// anything but a string is "".
func stringOf(v []byte) string {
	if len(v) < 2 || v[0] != '"' {
		return ""
	}
	inner := v[1 : len(v)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return unsafe.String(unsafe.SliceData(inner), len(inner))
	}
	return gjson.ParseBytes(v).Str
}

// walker steps through JSON already known to be valid, so it checks nothing.
type walker struct {
	b []byte
	i int
}

func (w *walker) ws() { w.i = jsonspace.Skip(w.b, w.i) }

// skip passes over the value at w.i (after any whitespace) and returns where it lay.
func (w *walker) skip() span {
	w.ws()
	start := w.i
	switch w.b[w.i] {
	case '"':
		w.str()
	case '{', '[':
		b, i, depth := w.b, w.i, 0
	scan:
		for {
			switch b[i] {
			case '"':
				i++
				for b[i] != '"' {
					if b[i] == '\\' {
						i++
					}
					i++
				}
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					i++
					break scan
				}
			}
			i++
		}
		w.i = i
	default: // a number, true, false or null
		for w.i < len(w.b) {
			switch w.b[w.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return span{start, w.i}
			}
			w.i++
		}
	}
	return span{start, w.i}
}

// str passes over the string starting at w.i.
func (w *walker) str() {
	b, i := w.b, w.i+1
	for {
		switch b[i] {
		case '"':
			w.i = i + 1
			return
		case '\\':
			i += 2 // the escape and the byte it escapes
		default:
			i++
		}
	}
}

// object calls member with each key of the object at w.i, positioned at the key's value,
// which member must pass over.
func (w *walker) object(member func(key []byte)) {
	w.ws()
	w.i++ // {
	for {
		w.ws()
		if w.b[w.i] == '}' {
			w.i++
			return
		}
		if w.b[w.i] == ',' {
			w.i++
			w.ws()
		}
		ks := w.i
		w.str()
		key := w.b[ks+1 : w.i-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			key = []byte(gjson.ParseBytes(w.b[ks:w.i]).Str)
		}
		w.ws()
		w.i++ // :
		w.ws()
		member(key)
	}
}

// array calls elem for each element of the array at w.i, positioned at the element, which
// elem must pass over.
func (w *walker) array(elem func()) {
	w.ws()
	w.i++ // [
	for {
		w.ws()
		if w.b[w.i] == ']' {
			w.i++
			return
		}
		if w.b[w.i] == ',' {
			w.i++
			w.ws()
		}
		elem()
	}
}

// prefix is the start of a body for a message: at most n bytes of it, in one line.
func prefix(b []byte, n int) string {
	s := strings.Join(strings.Fields(strings.ToValidUTF8(string(b[:min(len(b), 4*n)]), "\uFFFD")), " ")
	if len(s) > n {
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		return s[:n] + "…"
	}
	return s
}

// parseRetryAfter reads Retry-After as seconds or an HTTP date; 0 when absent or invalid.
func parseRetryAfter(v string, now time.Time) time.Duration {
	d, _ := retry.ParseRetryAfter(v, now)
	return d
}
