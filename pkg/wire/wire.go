// Package wire is the events API as it goes over HTTP: the names, codes and shapes that an
// evtctl node, its client and its senders share, stated once. It is a reference: it holds
// no behaviour beyond the text of an error.
//
// # The events method
//
// A node answers the `events` method of Tendermint's ADR-075 as JSON-RPC 2.0, POSTed to its
// root (PathRPC):
//
//	{"jsonrpc":"2.0","id":1,"method":"events","params":{
//	  "filter":{"query":"tm.event = 'Tx'"},"maxItems":5,
//	  "after":"18ea6111325460d5-0001","before":"","waitTime":2000000000}}
//
// Params holds those members. Every one is optional; the params object may also be an array
// in the order of Positional. waitTime is a JSON number of nanoseconds. With before empty the
// node long-polls until an item after `after` matches or the wait ends (which is no error: the
// items are then []); with before set it answers at once. A Tendermint node takes maxItems
// <= 0 as 10 and caps it at 100, and clamps waitTime to [1s, 30s]; it matches member names
// without regard to case.
//
// The result (Reply) holds items newest first, more (older eligible items were left out: ask
// again with before = the oldest cursor returned), and oldest and newest, the bounds of the
// whole log ("" when it holds nothing):
//
//	{"jsonrpc":"2.0","id":1,"result":{"items":[
//	  {"cursor":"18ea61a27c399e6c-00c6","event":"Tx","data":{...}}],
//	  "more":true,"oldest":"18ea619f6feba489-0001","newest":"18ea61a27c39abd8-00c7"}}
//
// An error is a JSON-RPC error object (Error) with one of the Code constants; its data
// carries the words (`invalid cursor "zzz": invalid cursor format`).
//
// The GET form, PathEvents with the params as a query string (Param names; values bare or
// quoted as JSON strings), answers the bare result object, and an error as the bare error
// object, with HTTP 200 either way.
//
// # Cursors
//
// A cursor is text: 16 lower-case hex digits of a Unix-nanosecond time, a dash, and the
// hex digits of a sequence number (4 on a Tendermint node, up to 16 on an evtctl node); ""
// is before the start of the log. Package cursor holds the typed form (cursor.Cursor, which
// marshals to this text), the rules for comparing cursors and the gap rule: a reader whose
// last cursor is older than a reply's oldest, by the rules of cursor.Check, has missed the
// events in between (a gap), and one whose cursor the log cannot hold is reading another
// log. The wire carries only the text, so that a client passes on what a node sent byte for
// byte; the types here hold cursors as strings.
//
// # evtctl's extensions
//
// An evtctl node also takes params.order ("asc": oldest first; echoed in the reply, which a
// Tendermint node never does, so a client learns which kind of node it reads) and may say
// resume: where a page cut short by the node's work budget, or by damage to its log, goes
// on. Busy (CodeBusy) is its answer to too many waiting readers or a log unavailable for
// the moment, worth retrying, with Retry-After where it knows when.
//
// The stream (PathStream, advertised in HeaderStream of the node's replies) returns a
// whole range oldest first in one response of JSON lines (MediaNDJSON):
//
//	GET /events/stream?after=CURSOR&before=CURSOR&query=Q
//
// HeaderOldest and HeaderNewest give the log's bounds as the stream begins; each line is an
// Item as a page holds it, on one line; the last line is a StreamEnd. A stream without that
// line was cut off, and a client resumes after the last item it received.
//
// Events are written by POSTing CloudEvents to PathEvents: in structured mode
// (application/cloudevents+json), batch mode (application/cloudevents-batch+json) or
// binary mode (ce- headers). The node answers an event with an IngestReply and a batch with a BatchReply, or a
// refusal with ErrorBody. HeaderOrder keeps batches sent side by side in their order.
package wire

import (
	"encoding/json"
	"fmt"
	"time"
)

// Paths of an evtctl node. A Tendermint node serves PathRPC only.
const (
	PathRPC     = "/"              // POST: JSON-RPC 2.0, method "events"
	PathEvents  = "/events"        // GET: the events method by query string; POST: CloudEvents ingest
	PathStream  = "/events/stream" // GET: a range as JSON lines (evtctl's)
	PathHealth  = "/healthz"       // GET: the node's health
	PathMetrics = "/metrics"       // GET: the node's Prometheus metrics
)

// The JSON-RPC envelope.
const (
	Version = "2.0"    // the value of "jsonrpc"
	Method  = "events" // the one method served
)

// Names of the params of the events method, also the GET form's query parameters.
const (
	ParamFilter   = "filter"   // an object {"query": "..."}
	ParamQuery    = "query"    // the member of filter; in the GET form and the stream's query string, the query itself
	ParamMaxItems = "maxItems" // most items to return
	ParamAfter    = "after"    // exclusive lower bound, a cursor
	ParamBefore   = "before"   // exclusive upper bound, a cursor; set, the node does not wait
	ParamWaitTime = "waitTime" // the longest long-poll, in nanoseconds
	ParamOrder    = "order"    // evtctl's: OrderAsc for oldest first
)

// Positional is the order of the params when they are sent as an array.
var Positional = [...]string{ParamFilter, ParamMaxItems, ParamAfter, ParamBefore, ParamWaitTime}

// Spellings of ADR-075's text that an evtctl node takes too (a Tendermint node does not).
const (
	AltMaxResults = "max_results" // for maxItems
	AltMaxItems   = "max_items"   // for maxItems
	AltWaitTime   = "wait_time"   // for waitTime
)

// Values of the order param and of a reply's order.
const (
	OrderAsc  = "asc"  // oldest first
	OrderDesc = "desc" // newest first: the default, and all a Tendermint node does
)

// Names of the members of a reply (Reply), of an item (Item) and of a stream's last line
// (StreamEnd).
const (
	KeyItems  = "items"
	KeyMore   = "more"
	KeyOldest = "oldest"
	KeyNewest = "newest"
	KeyResume = "resume" // evtctl's
	KeyOrder  = "order"  // evtctl's

	KeyCursor = "cursor"
	KeyEvent  = "event"
	KeyData   = "data"

	KeyEnd = "end"
)

// Names of the members of an IngestReply and a BatchReply.
const (
	KeyDuplicate = "duplicate"
	KeyCount     = "count"
	KeyResults   = "results"
)

// Names of the members of the JSON-RPC envelope and of its error object.
const (
	KeyJSONRPC = "jsonrpc"
	KeyID      = "id"
	KeyMethod  = "method"
	KeyParams  = "params"
	KeyResult  = "result"
	KeyError   = "error"

	KeyCode    = "code"
	KeyMessage = "message"
)

// Codes of an Error: JSON-RPC 2.0's, as a Tendermint node uses them, and evtctl's CodeBusy.
const (
	CodeParseError     = -32700 // the body is not JSON
	CodeInvalidRequest = -32600 // not a JSON-RPC request object
	CodeMethodNotFound = -32601 // a method other than "events"
	CodeInvalidParams  = -32602 // params that cannot be decoded (a waitTime string on Tendermint)
	CodeInternalError  = -32603 // a bad query or cursor, a failed read: see the data
	CodeBusy           = -32000 // evtctl's: too many waiting readers, or the log unavailable for now; retry
)

// Message is the message that goes with a code: "Parse error", "Server busy"; "" for a code
// not listed here.
func Message(code int) string {
	switch code {
	case CodeParseError:
		return "Parse error"
	case CodeInvalidRequest:
		return "Invalid Request"
	case CodeMethodNotFound:
		return "Method not found"
	case CodeInvalidParams:
		return "Invalid params"
	case CodeInternalError:
		return "Internal error"
	case CodeBusy:
		return "Server busy"
	}
	return ""
}

// HTTP headers.
const (
	// HeaderStream, on an evtctl node's replies to the events method, is the path of its
	// stream (PathStream).
	HeaderStream = "Evtctl-Stream"
	// HeaderOldest and HeaderNewest, on a stream's reply, are the log's oldest and newest
	// cursors as the stream begins; oldest is "" when the log holds nothing after `after`.
	HeaderOldest = "Evtctl-Oldest"
	HeaderNewest = "Evtctl-Newest"
	// HeaderOrder asks an evtctl node to store a batch in its place in a sequence of
	// batches: "TOKEN N", TOKEN letters, digits, '-' and '_' (at most 64), N from 1. The
	// node answers OrderStored when it did, OrderRefused (with 409) when it stored nothing
	// because of its place; any other receiver ignores it.
	HeaderOrder = "Evtctl-Order"
	// HeaderRetryAfter is how long to wait before retrying a refusal, in seconds (or an
	// HTTP date).
	HeaderRetryAfter = "Retry-After"
)

// Values of HeaderOrder in a reply.
const (
	OrderStored  = "ok"
	OrderRefused = "refused"
)

// Media types.
const (
	MediaJSON   = "application/json"     // requests and replies of the events method
	MediaNDJSON = "application/x-ndjson" // a stream's body
)

// Params are the params of the events method as a client sends them (Tendermint's
// RequestEvents, and evtctl's order). Zero members are left out.
type Params struct {
	Filter   *Filter       `json:"filter,omitempty"`
	MaxItems int           `json:"maxItems,omitempty"`
	After    string        `json:"after,omitempty"`
	Before   string        `json:"before,omitempty"`
	WaitTime time.Duration `json:"waitTime,omitempty"` // a JSON number of nanoseconds
	Order    string        `json:"order,omitempty"`    // OrderAsc, or "" for newest first
}

// Filter selects the items of a call by a query in the filter language (package filter).
type Filter struct {
	Query string `json:"query"`
}

// Request is a JSON-RPC request object: P is *Params to send one, json.RawMessage to read
// one whose params are yet to be decoded.
type Request[P any] struct {
	JSONRPC string          `json:"jsonrpc"` // Version
	ID      json.RawMessage `json:"id"`      // a string or a whole number; none, or null, makes a notification
	Method  string          `json:"method"`  // Method
	Params  P               `json:"params"`
}

// Reply is the result of the events method.
type Reply struct {
	Items []Item `json:"items"` // newest first, unless Order is OrderAsc
	PageEnd
}

// PageEnd is what a Reply says after its items.
type PageEnd struct {
	More   bool   `json:"more"`   // matching items were left out: ask again from the last item
	Oldest string `json:"oldest"` // the oldest item in the whole log; "" when it holds none
	Newest string `json:"newest"` // the newest item in the whole log
	// Resume (evtctl's) is where to ask again when the node stopped short of the range
	// (its work budget, or a range lost to damage): as after for an ascending page, as
	// before for a newest-first one.
	Resume string `json:"resume,omitempty"`
	// Order (evtctl's) is OrderAsc when the items are oldest first, as asked.
	Order string `json:"order,omitempty"`
}

// Item is one item of the log: its cursor, its event's name (an evtctl node's CloudEvent
// type, a Tendermint event's kind) and its data (the CloudEvent in JSON format on an evtctl
// node).
type Item struct {
	Cursor string          `json:"cursor"`
	Event  string          `json:"event"`
	Data   json.RawMessage `json:"data"`
}

// Error is a JSON-RPC error object.
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    string `json:"data,omitempty"` // what went wrong, in words
}

// Error is the data, or else the message and the code.
func (e *Error) Error() string {
	if e.Data != "" {
		return e.Data
	}
	return fmt.Sprintf("%s (code %d)", e.Message, e.Code)
}

// StreamEnd is the last line of a stream: {"end":{"more":false,"newest":"…"}}.
type StreamEnd struct {
	End StreamTail `json:"end"`
}

// StreamTail is what a stream's last line says.
type StreamTail struct {
	// More is false when every item up to before (or the head, when the stream was read)
	// was sent; true when the node stopped short (its work budget, damage, shutting down),
	// and a client asks again after Resume, or after its last item if later.
	More   bool   `json:"more"`
	Resume string `json:"resume,omitempty"`
	Newest string `json:"newest"` // the newest item in the log at the end
}

// IngestReply is an evtctl node's answer to an event POSTed alone (or as a signal, which
// also says the event's id and type).
type IngestReply struct {
	Cursor    string `json:"cursor"`
	Duplicate bool   `json:"duplicate"`      // the node held an event of that source and id: not stored again
	ID        string `json:"id,omitempty"`   // a signal's
	Type      string `json:"type,omitempty"` // a signal's
}

// BatchReply is an evtctl node's answer to a batch: a result for each event, in order.
type BatchReply struct {
	Count   int           `json:"count"`
	Results []IngestReply `json:"results"`
}

// ErrorBody is an evtctl node's refusal of a request other than the events method's.
type ErrorBody struct {
	Error string `json:"error"`
	Index *int   `json:"index,omitempty"` // the event of a batch at fault, from 0
}
