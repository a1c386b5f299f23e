// Package client is a cursor-aware client of event logs. It speaks the `events` method of
// Tendermint's ADR-075, as evtctl nodes and Tendermint nodes serve it, and reads every other
// log a source puts behind the same page interface (Source): CometBFT chains, Kafka topics,
// Redis streams. Stream follows a log's head, Range reads a stretch of it, Page reads one
// page; all three keep ADR-075's guarantees — each matching item once, in order, with every
// loss reported — whatever the source.
package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Options configure a Client.
type Options struct {
	// Node is the log's address: an http(s) URL or host:port (an evtctl, Tendermint or
	// CometBFT node), or an address of a registered source's scheme (kafka://, redis://, …).
	Node      string
	Token     string // bearer token, sent as Authorization: Bearer <token>
	CAFile    string // PEM bundle of CAs to trust for TLS, beside the system pool
	Insecure  bool   // skip TLS certificate verification
	UserAgent string
	// Settings are settings of the log's source by the names it gives them (a Kafka
	// topic's security.protocol, sasl.username, …), as a context keeps them for its node;
	// options written in the node's address win over them.
	Settings map[string]string
	// HTTPClient replaces the default client (tests); its timeout must exceed the longest wait.
	HTTPClient *http.Client
	// OnDetect is told, once, what an HTTP node turned out to be when it is not a node of
	// the events method and a source took it over (a CometBFT node); nil: nobody is told.
	OnDetect func(what string)
}

// Kind is what a client has learned of its node from its replies.
type Kind int32

const (
	// KindUnknown: no reply to a request for ascending order has come back yet.
	KindUnknown Kind = iota
	// KindEvtctl: the node has evtctl's extensions (ascending order, its query language).
	KindEvtctl
	// KindTendermint: the node pages newest first only and takes only Tendermint's query
	// language, as a Tendermint node does.
	KindTendermint
	// KindOther: the log is read through another source (a CometBFT chain, a Kafka topic,
	// a Redis stream), not through the events method.
	KindOther
)

// Client reads one log through its source.
type Client struct {
	opts Options
	rpc  *rpcNode // the node's events method, when the log is reached over HTTP
	src  atomic.Pointer[sourceRef]
	// detectMu serializes asking the detectors about a node without the events method.
	detectMu sync.Mutex
}

type sourceRef struct{ Source }

// failing is the answer of a detector that knows a node and cannot read it: every call
// fails with its reason.
type failing struct {
	Source
	err error
}

func (f *failing) Page(context.Context, PageRequest) (*Page, error) { return nil, f.err }
func (f *failing) Bounds(context.Context) (string, string, error)   { return "", "", f.err }
func (f *failing) At(context.Context, time.Time) (string, error)    { return "", f.err }

// New returns a client of the log at opts.Node.
func New(opts Options) (*Client, error) {
	c := &Client{opts: opts}
	if d, scheme := driverFor(opts.Node); scheme != "" && scheme != "http" && scheme != "https" {
		if d == nil {
			return nil, &UnknownSchemeError{Scheme: scheme}
		}
		src, err := d.Open(opts.Node, opts)
		if err != nil {
			return nil, err
		}
		c.src.Store(&sourceRef{src})
		return c, nil
	}
	n, err := newRPCNode(opts)
	if err != nil {
		return nil, err
	}
	c.rpc = n
	c.src.Store(&sourceRef{newEventsSource(n)})
	return c, nil
}

// Source is the source the client reads through: what its node turned out to be so far.
func (c *Client) Source() Source { return c.src.Load().Source }

// Node names the log, any password redacted: it is for messages and checkpoint files.
func (c *Client) Node() string { return c.Source().Node() }

// Kind reports what the client has learned of its node so far.
func (c *Client) Kind() Kind {
	if _, ok := c.Source().(*eventsSource); !ok {
		return KindOther
	}
	return c.rpc.Kind()
}

// Answered reports whether the node has answered a call of the events method with a result
// since the client was made. Until it has, failures that waiting cannot mend are final
// (see ContactError).
func (c *Client) Answered() bool { return c.rpc != nil && c.rpc.Answered() }

// errNoEventsMethod is a call of the events method on a log that is not read through it.
var errNoEventsMethod = errors.New("the log is not read through the events method")

// Events calls the events method once, on a node that serves it. The request's context
// bounds the call; a long-poll is given its wait plus a margin. Until the node has answered
// once, a failure that waiting does not mend is a *ContactError.
func (c *Client) Events(ctx context.Context, req Request) (*Reply, error) {
	if c.rpc == nil || c.Kind() == KindOther {
		return nil, errNoEventsMethod
	}
	return c.rpc.Events(ctx, req)
}

// Page reads one page of the log (see Source.Page), in one attempt.
func (c *Client) Page(ctx context.Context, r PageRequest) (*Page, error) {
	src := c.Source()
	p, err := src.Page(ctx, r)
	if err != nil {
		if other := c.detect(ctx, src, err); other != nil {
			return other.Page(ctx, r)
		}
	}
	return p, err
}

// Bounds reports the log's oldest and newest positions now (see Source.Bounds).
func (c *Client) Bounds(ctx context.Context) (oldest, newest string, err error) {
	src := c.Source()
	oldest, newest, err = src.Bounds(ctx)
	if err != nil {
		if other := c.detect(ctx, src, err); other != nil {
			return other.Bounds(ctx)
		}
	}
	return oldest, newest, err
}

// At is the position just before the first item stamped at or after t (see Source.At).
func (c *Client) At(ctx context.Context, t time.Time) (string, error) {
	src := c.Source()
	pos, err := src.At(ctx, t)
	if err != nil {
		if other := c.detect(ctx, src, err); other != nil {
			return other.At(ctx, t)
		}
	}
	return pos, err
}

// Compare orders two positions of the log (see Source.Compare).
func (c *Client) Compare(a, b string) int { return c.Source().Compare(a, b) }

// Later returns the later of two positions of the log; a when they are equal.
func (c *Client) Later(a, b string) string {
	if c.Compare(b, a) > 0 {
		return b
	}
	return a
}

// CheckPosition reports a position (a cursor from the command line or a checkpoint) that
// cannot be one of the log's, as far as the source can tell without asking it.
func (c *Client) CheckPosition(pos string) error {
	src := c.Source()
	if _, ok := src.(*eventsSource); ok && !c.Answered() && isDetectedCursor(pos) {
		// The node has not answered yet: it may turn out to be read through another source
		// found behind an http address (a CometBFT node), whose positions this may be.
		return nil
	}
	if pc, ok := src.(interface{ CheckPosition(string) error }); ok {
		return pc.CheckPosition(pos)
	}
	return nil
}

// An Identifier is a source whose positions are the same on several nodes of one log (a
// chain's heights on every node of the chain), and that can tell another log from its own:
// a checkpoint records the identity of the log at its position, and resuming it against
// another log is refused.
type Identifier interface {
	// Identity is what names the log at a position, as JSON to keep beside it.
	Identity(ctx context.Context, pos string) (json.RawMessage, error)
	// CheckIdentity reports, as an error that says so, that id (from Identity) is not of
	// this log.
	CheckIdentity(ctx context.Context, id json.RawMessage) error
}

// Identity is what names the log at a position, for a checkpoint to keep; nil when the
// source has no such thing.
func (c *Client) Identity(ctx context.Context, pos string) (json.RawMessage, error) {
	if id, ok := c.Source().(Identifier); ok && pos != "" {
		return id.Identity(ctx, pos)
	}
	return nil, nil
}

// CheckIdentity reports a saved identity (see Identity) that is not of this log.
func (c *Client) CheckIdentity(ctx context.Context, saved json.RawMessage) error {
	if id, ok := c.Source().(Identifier); ok && len(saved) > 0 {
		return id.CheckIdentity(ctx, saved)
	}
	return nil
}

// detect asks the registered detectors about an HTTP node that answered the events method
// as something that does not serve it (err, from src), and switches the client to the
// source one of them offers. It returns that source, or nil.
func (c *Client) detect(ctx context.Context, src Source, err error) Source {
	var ce *ContactError
	if c.rpc == nil || !errors.As(err, &ce) || ce.Kind != NotEventsAPI || ctx.Err() != nil {
		return nil
	}
	c.detectMu.Lock()
	defer c.detectMu.Unlock()
	if now := c.Source(); now != src {
		return now // another call switched meanwhile
	}
	opts := c.opts
	opts.Node = c.rpc.url()
	for _, d := range detectors() {
		other, derr := d(ctx, opts.Node, opts)
		if derr != nil {
			// The detector knows the node and cannot read it: that is the answer.
			f := &failing{Source: src, err: derr}
			c.src.Store(&sourceRef{f})
			return f
		}
		if other == nil {
			continue
		}
		c.src.Store(&sourceRef{other})
		if c.opts.OnDetect != nil {
			if dd, ok := other.(interface{ Describe() string }); ok {
				c.opts.OnDetect(dd.Describe())
			}
		}
		return other
	}
	return nil
}
