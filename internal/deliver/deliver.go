// Package deliver is evtctl's one HTTP sender: a Client that treats a receiver's replies by
// a Policy (what is retried, Retry-After, 410 Gone, redirects and credentials), and a
// Sender of CloudEvents in binary, structured or batch mode on top of it.
package deliver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/evtctl/evtctl/internal/cevent"
	"github.com/evtctl/evtctl/pkg/wire"
)

// Mode is the HTTP content mode of the CloudEvents HTTP binding.
type Mode int

// The content modes.
const (
	Binary     Mode = iota // one request per event: attributes in ce- headers, data in the body
	Structured             // one request per event: the event in JSON format
	Batch                  // one request for all events: a JSON array
)

// String returns "binary", "structured" or "batch".
func (m Mode) String() string {
	switch m {
	case Binary:
		return "binary"
	case Structured:
		return "structured"
	case Batch:
		return "batch"
	}
	return "Mode(" + strconv.Itoa(int(m)) + ")"
}

// ParseMode parses "binary", "structured" or "batch".
func ParseMode(s string) (Mode, error) {
	for _, m := range []Mode{Binary, Structured, Batch} {
		if strings.EqualFold(s, m.String()) {
			return m, nil
		}
	}
	return 0, fmt.Errorf("unknown mode %q: want binary, structured or batch", s)
}

// Media types sent in structured and batch mode.
const (
	ContentTypeStructured = cevent.MediaTypeStructured + "; charset=UTF-8"
	ContentTypeBatch      = cevent.MediaTypeBatch
)

// Options configures a Sender.
type Options struct {
	URL     string      // target, e.g. http://127.0.0.1:7480/events or a webhook
	Mode    Mode        // content mode
	Headers http.Header // extra headers, for the target's origin only (a Host entry sets the Host); a Content-Type among them is ignored
	Token   string      // bearer token for Authorization, if any; for the target's origin only
	// HeaderEncoding is how Binary mode writes ce- header values; the zero
	// value is the binding's percent-encoding.
	HeaderEncoding HeaderEncoding
	// Node says the target is an evtctl node, which reads the JSON format as its specification
	// says and keeps JSON data as JSON: Structured and Batch mode send each event to it as it
	// is. To any other receiver, JSON data of a type the CloudEvents Go SDK v2 does not read as
	// JSON (application/vnd.api+json, say) goes as data_base64, which every receiver reads
	// alike (see cevent.ForSDK).
	Node bool
	// Policy says what is retried and how often, and how many redirects are followed; nil
	// means WebhookPolicy(). See Policy for the rules every policy keeps.
	Policy *Policy
	// Client sends the requests; nil means a default client. Its
	// CheckRedirect is replaced (on a copy) by the Policy's redirect rules.
	Client *http.Client
	// Timeout bounds one attempt, reading the reply included; default 30s.
	Timeout time.Duration
	// UserAgent is sent unless Headers has one; default "evtctl".
	UserAgent string
	// OnRetry, if set, is called before waiting to retry: attempt is the
	// number of the attempt that failed (1 for the first), delay the wait
	// and err the failure.
	OnRetry func(attempt int, delay time.Duration, err error)
}

// Result is the outcome of delivering one event.
type Result struct {
	Cursor    string // the event's cursor when the target is an evtctl node, else ""
	Duplicate bool   // an evtctl node already had the event (same source and id)
	Status    int    // HTTP status of the successful reply
}

// Sender delivers CloudEvents to one target through a Client. It is safe for concurrent
// use.
type Sender struct {
	opts Options
	c    *Client
}

// New checks opts and returns a Sender.
func New(opts Options) (*Sender, error) {
	switch opts.Mode {
	case Binary, Structured, Batch:
	default:
		return nil, fmt.Errorf("unknown mode %d", opts.Mode)
	}
	switch opts.HeaderEncoding {
	case HeaderPercent, HeaderRaw:
	default:
		return nil, fmt.Errorf("unknown header encoding %d", opts.HeaderEncoding)
	}
	c, err := NewClient(Config{
		URL: opts.URL, Policy: opts.Policy, Header: opts.Headers, Token: opts.Token, UserAgent: opts.UserAgent,
		Timeout: opts.Timeout, HTTPClient: opts.Client, OnRetry: opts.OnRetry,
	})
	if err != nil {
		return nil, err
	}
	return &Sender{opts: opts, c: c}, nil
}

// Where returns the target's URL without a password, for messages.
func (s *Sender) Where() string { return s.c.Where() }

// Send delivers events: one request per event (Binary, Structured) or one
// request for all (Batch). It returns one Result per event, in order. On
// error it returns the results of the events delivered before the failure
// (none in Batch mode, which is all or nothing) and the error, which wraps a
// *StatusError when the target answered, ErrGone on a 410, or ctx.Err()
// when ctx ended. Each event must be one CloudEvent in JSON format. Sending
// no events sends no request.
func (s *Sender) Send(ctx context.Context, events [][]byte) ([]Result, error) {
	if len(events) == 0 {
		return []Result{}, nil
	}
	if s.opts.Mode == Batch {
		n := len(events) + 1
		for _, ev := range events {
			n += len(ev)
		}
		body := make([]byte, 0, n)
		body = append(body, '[')
		for i, ev := range events {
			if i > 0 {
				body = append(body, ',')
			}
			body = append(body, ev...)
		}
		body = append(body, ']')
		return s.SendBatch(ctx, body, len(events))
	}
	results := make([]Result, 0, len(events))
	for i, ev := range events {
		h, body, err := encode(s.opts.Mode, s.opts.HeaderEncoding, ev, s.opts.Node)
		if err != nil {
			return results, fmt.Errorf("event %d: %s mode: %w", i, s.opts.Mode, err)
		}
		a, err := s.c.Do(ctx, Request{Header: h, Body: body, KeepReply: true})
		if err != nil {
			if len(events) > 1 {
				return results, fmt.Errorf("POST %s (event %d of %d): %w", s.c.Where(), i+1, len(events), err)
			}
			return results, fmt.Errorf("POST %s: %w", s.c.Where(), err)
		}
		results = append(results, singleResult(a.Status, a.Reply))
	}
	return results, nil
}

// SendBatch delivers a batch that is already encoded: body is a JSON array of n events in
// JSON format, sent as one request whatever the Sender's mode, in the form Options.Node
// says. It returns n Results, or none and an error, as Send does in Batch mode.
func (s *Sender) SendBatch(ctx context.Context, body []byte, n int) ([]Result, error) {
	h := http.Header{"Content-Type": {ContentTypeBatch}}
	if !s.opts.Node {
		body = cevent.ForSDKBatch(body)
	}
	a, err := s.c.Do(ctx, Request{Header: h, Body: body, KeepReply: true})
	if err != nil {
		return nil, fmt.Errorf("POST %s (batch of %d): %w", s.c.Where(), n, err)
	}
	return batchResults(a.Status, a.Reply, n), nil
}

// SendOrderedBatch is SendBatch as batch seq of the sequence token. ordered reports that
// the receiver stored it in its place (an evtctl node that keeps sequences): only then may
// the next batch of the sequence be sent before this one's reply.
func (s *Sender) SendOrderedBatch(ctx context.Context, body []byte, n int, token string, seq uint64) (res []Result, ordered bool, err error) {
	h := http.Header{"Content-Type": {ContentTypeBatch}, wire.HeaderOrder: {token + " " + strconv.FormatUint(seq, 10)}}
	if !s.opts.Node {
		body = cevent.ForSDKBatch(body)
	}
	a, err := s.c.Do(ctx, Request{Header: h, Body: body, KeepReply: true})
	if err != nil {
		return nil, false, fmt.Errorf("POST %s (batch of %d): %w", s.c.Where(), n, err)
	}
	return batchResults(a.Status, a.Reply, n), a.Header.Get(wire.HeaderOrder) == wire.OrderStored, nil
}

// OrderRefused reports whether err is an evtctl node refusing a batch for its place in a
// sequence (storing nothing of it).
func OrderRefused(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && se.Status == http.StatusConflict && se.Header.Get(wire.HeaderOrder) == wire.OrderRefused
}

// nodeReply is an evtctl node's answer to POST /events: one event's, or a batch's.
type nodeReply struct {
	wire.IngestReply
	wire.BatchReply
}

func parseReply(reply []byte) (nodeReply, bool) {
	var r nodeReply
	b := bytes.TrimSpace(reply)
	if len(b) == 0 || b[0] != '{' || json.Unmarshal(b, &r) != nil {
		return nodeReply{}, false
	}
	return r, true
}

func singleResult(status int, reply []byte) Result {
	r, _ := parseReply(reply)
	return Result{Cursor: r.Cursor, Duplicate: r.Duplicate, Status: status}
}

// batchResults reads the Results of a batch of n events from the reply: the cursors an
// evtctl node gives, or only the status from another receiver.
func batchResults(status int, reply []byte, n int) []Result {
	out := make([]Result, n)
	for i := range out {
		out[i].Status = status
	}
	if readBatchReply(reply, out) {
		return out
	}
	r, ok := parseReply(reply)
	if ok && len(r.Results) == n {
		for i := range out {
			out[i].Cursor, out[i].Duplicate = r.Results[i].Cursor, r.Results[i].Duplicate
		}
	}
	return out
}

// A wire.BatchReply as an evtctl node writes it, which readBatchReply reads.
const (
	replyCount     = `{"` + wire.KeyCount + `":`
	replyResults   = `,"` + wire.KeyResults + `":[`
	replyCursor    = `{"` + wire.KeyCursor + `":"`
	replyDuplicate = `","` + wire.KeyDuplicate + `":`
)

// readBatchReply reads an evtctl node's reply to a batch as the node writes it,
// {"count":N,"results":[{"cursor":"…","duplicate":false},…]}, into out, which must have a
// place for each result: the cursors share one string. It reports false, having changed
// nothing, for a reply in any other form (which parseReply reads) or with another number
// of results.
func readBatchReply(reply []byte, out []Result) bool {
	b := bytes.TrimRight(reply, " \t\r\n")
	i, ok := skipPrefix(b, 0, replyCount)
	if !ok {
		return false
	}
	d := i
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	if i == d {
		return false
	}
	if i, ok = skipPrefix(b, i, replyResults); !ok {
		return false
	}
	type span struct {
		start, end int
		dup        bool
	}
	spans := make([]span, 0, len(out))
	for i < len(b) && b[i] != ']' {
		if len(spans) > 0 {
			if b[i] != ',' {
				return false
			}
			i++
		}
		if i, ok = skipPrefix(b, i, replyCursor); !ok {
			return false
		}
		c := i
		for i < len(b) && b[i] != '"' && b[i] != '\\' && b[i] >= 0x20 && b[i] < 0x80 {
			i++
		}
		sp := span{start: c, end: i}
		if i, ok = skipPrefix(b, i, replyDuplicate); !ok {
			return false
		}
		switch {
		case bytes.HasPrefix(b[i:], []byte("true}")):
			sp.dup, i = true, i+len("true}")
		case bytes.HasPrefix(b[i:], []byte("false}")):
			i += len("false}")
		default:
			return false
		}
		if len(spans) == len(out) {
			return false
		}
		spans = append(spans, sp)
	}
	if len(spans) != len(out) || string(b[i:]) != "]}" {
		return false
	}
	all := string(b)
	for k, sp := range spans {
		out[k].Cursor, out[k].Duplicate = all[sp.start:sp.end], sp.dup
	}
	return true
}

// skipPrefix returns the offset after p when b holds p at i.
func skipPrefix(b []byte, i int, p string) (int, bool) {
	if len(b)-i < len(p) || string(b[i:i+len(p)]) != p {
		return i, false
	}
	return i + len(p), true
}
