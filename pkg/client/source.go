package client

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/evtctl/evtctl/pkg/cursor"
)

// A Source is one kind of event log behind the client's page interface: an evtctl node, a
// Tendermint node, a CometBFT chain, a Kafka topic, a Redis stream. The client's streamer,
// its range reader, the terminal UI and forward see only pages, positions and gaps; how a
// source pages, long-polls, filters and numbers its items is its own affair.
//
// Positions. An item's cursor names one item; a position is where a reader stands in the
// whole log: every item up to it has been examined. For a single ordered log a position is
// an item's cursor or a made-up point between items; for a log of independent partitions it
// names a point in each. Callers never make a position from a cursor themselves, nor parse
// or compare either: they take positions from the source (Page.Next, Item.Pos, Bounds, At)
// and order them with Compare.
type Source interface {
	// Node names the log for messages and checkpoints, with any password redacted.
	Node() string
	// Page reads one page of the log; see PageRequest. It makes one attempt: the caller
	// retries an error for which Retryable reports true. A query the source cannot
	// evaluate is a *QueryError.
	Page(ctx context.Context, r PageRequest) (*Page, error)
	// Bounds reports the log's oldest and newest positions now ("" when it holds nothing),
	// without waiting.
	Bounds(ctx context.Context) (oldest, newest string, err error)
	// At is the position just before the first item stamped at or after t: as an After, it
	// reads from t on. "" when every item the log holds is at or after t.
	At(ctx context.Context, t time.Time) (string, error)
	// Compare orders two positions of the log: -1 when a comes first, 0, +1. "" is before
	// every other.
	Compare(a, b string) int
}

// PageRequest asks a source for one page.
type PageRequest struct {
	Query string // the filter, in the language the source takes
	// After is the position the page starts after (exclusive); "" is the log's start.
	After string
	// Before bounds a backward page (exclusive); "" is the head.
	Before string
	// Through, when Before is "", bounds a page inclusively: the last position of a range.
	Through string
	// Max is the most items to return.
	Max int
	// Size is how many items to ask the log for at a time where the source must gather
	// more than Max to answer (a Tendermint node paged newest first); 0 means Max.
	Size int
	// Backward asks for the newest Max items before Before (or up to Through), newest
	// first; otherwise the oldest Max items after After.
	Backward bool
	// Wait, for a forward page open at the head: when nothing after After matches yet,
	// wait up to this long for the log to grow (a long-poll). 0 answers at once.
	Wait time.Duration
	// NoGap: After is not a position a reader held but a bound made up (from a time):
	// nothing is reported lost before it.
	NoGap bool
	// Reuse lets the source reuse the page's memory once Page.Release is called: the
	// items' strings and bytes are valid only until then.
	Reuse bool
}

// Page is one page of a log.
type Page struct {
	Items []Item // in the order asked for: oldest first, or newest first for a backward page
	// More: further matching items lie beyond the page in the direction asked for, within
	// the request's bounds. A forward page without More has caught up with the head.
	More bool
	// Oldest and Newest are the log's oldest and newest positions now, whatever the query
	// ("" when it holds nothing).
	Oldest, Newest string
	// Next is where the next page in the same direction starts: for a forward page, the
	// position the log has been examined up to (it may lie past the last item, over items
	// that did not match; an After for the next page); for a backward page, the Before of
	// the next one.
	Next string
	// Gap reports, on a forward page, that the log does not go on from After: items were
	// lost, the log started again, or After is not of this log. Nil when it goes on.
	Gap *Gap

	release func()
}

// Release gives back the page's memory, when it was asked for with Reuse; its items must
// not be used after.
func (p *Page) Release() {
	if p != nil && p.release != nil {
		p.release()
		p.release = nil
	}
}

// OnRelease sets what Release does once: a source that made the page's items in memory it
// reuses (PageRequest.Reuse) gives that memory back there.
func (p *Page) OnRelease(f func()) { p.release = f }

// PosOf is the position right after an item: where a reader stands once it has handled it.
func PosOf(it Item) string {
	if it.Pos != "" {
		return it.Pos
	}
	return it.Cursor
}

// PosBefore is the position just before an item: a page of older items read before it
// starts there. For a single ordered log it is the item's cursor.
func (c *Client) PosBefore(it Item) string {
	if pb, ok := c.Source().(interface{ PosBefore(Item) string }); ok {
		return pb.PosBefore(it)
	}
	return it.Cursor
}

// A Driver opens the sources of one kind of log.
type Driver struct {
	// Schemes are the schemes of node addresses it opens ("kafka", "cometbft+http", …).
	Schemes []string
	// Open opens a source for a node address of one of its schemes.
	Open func(node string, opts Options) (Source, error)
	// Detect, when set, is asked about HTTP nodes that do not serve the events method.
	Detect Detector
	// IsCursor reports whether text is a cursor or position of its logs: what a command
	// line takes as one before the log is reached.
	IsCursor func(string) bool
}

// A Detector is asked about an HTTP node that does not serve the events method: it returns
// a source for it when it knows what the node is and can read it; nil and an error that
// says why when it knows the node and cannot read it; nil, nil when the node is not of its
// kind.
type Detector func(ctx context.Context, base string, opts Options) (Source, error)

var drivers struct {
	sync.RWMutex
	schemes map[string]*Driver
	all     []*Driver
}

// Register makes d the driver of node addresses of its schemes. Packages of sources call
// it from init, as database/sql drivers do.
func Register(d Driver) {
	drivers.Lock()
	defer drivers.Unlock()
	if drivers.schemes == nil {
		drivers.schemes = map[string]*Driver{}
	}
	for _, s := range d.Schemes {
		if _, dup := drivers.schemes[s]; dup {
			panic("client: a second driver for " + s)
		}
		drivers.schemes[s] = &d
	}
	drivers.all = append(drivers.all, &d)
}

// Schemes lists the schemes of node addresses the client can open, beside http and https.
func Schemes() []string {
	drivers.RLock()
	defer drivers.RUnlock()
	var s []string
	for k := range drivers.schemes {
		s = append(s, k)
	}
	sort.Strings(s)
	return s
}

// IsCursor reports whether text is a cursor or position of some log evtctl reads: one of
// the events method's cursors, or one a registered source takes.
func IsCursor(s string) bool {
	if _, err := cursor.Parse(s); err == nil {
		return true
	}
	drivers.RLock()
	defer drivers.RUnlock()
	for _, d := range drivers.all {
		if d.IsCursor != nil && d.IsCursor(s) {
			return true
		}
	}
	return false
}

// isDetectedCursor reports whether s is a position of a log that may be found behind an
// HTTP address that does not serve the events method (a driver with a Detector).
func isDetectedCursor(s string) bool {
	drivers.RLock()
	defer drivers.RUnlock()
	for _, d := range drivers.all {
		if d.Detect != nil && d.IsCursor != nil && d.IsCursor(s) {
			return true
		}
	}
	return false
}

// driverFor returns the driver of a node address's scheme, or nil for http(s) and an
// address without one.
func driverFor(node string) (*Driver, string) {
	i := strings.Index(node, "://")
	if i <= 0 {
		return nil, ""
	}
	scheme := strings.ToLower(strings.TrimSpace(node[:i]))
	if scheme == "http" || scheme == "https" {
		return nil, scheme
	}
	drivers.RLock()
	defer drivers.RUnlock()
	return drivers.schemes[scheme], scheme
}

func detectors() []Detector {
	drivers.RLock()
	defer drivers.RUnlock()
	var ds []Detector
	for _, d := range drivers.all {
		if d.Detect != nil {
			ds = append(ds, d.Detect)
		}
	}
	return ds
}

// Redact is a node address with any password in it replaced, for messages.
func Redact(node string) string {
	u, err := url.Parse(node)
	if err != nil || u.User == nil {
		return node
	}
	return u.Redacted()
}

// UnknownSchemeError is a node address whose scheme no source takes.
type UnknownSchemeError struct{ Scheme string }

func (e *UnknownSchemeError) Error() string {
	return fmt.Sprintf("no source reads %s:// addresses (evtctl reads http://, https://, %s)", e.Scheme, otherSchemes())
}

// otherSchemes lists the schemes of registered sources, for messages.
func otherSchemes() string {
	var s []string
	for _, k := range Schemes() {
		s = append(s, k+"://")
	}
	if len(s) == 0 {
		return "no other"
	}
	return strings.Join(s, ", ")
}

// QueryError is a query the client did not send because the source would refuse it: it is
// not valid in the language the source takes. Err is a *filter.SyntaxError pointing at the
// byte.
type QueryError struct {
	Query string
	// Language names the language the source takes, for the message ("Tendermint's query
	// language").
	Language string
	Err      error
}

func (e *QueryError) Error() string {
	lang := e.Language
	if lang == "" {
		lang = "Tendermint's query language"
	}
	return "the node takes only " + lang + ": " + e.Err.Error()
}
func (e *QueryError) Unwrap() error { return e.Err }
