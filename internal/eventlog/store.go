// Package eventlog is the node's event log: an append-only, checksummed, retained log of
// CloudEvents addressed by time-ordered cursors, durable on disk or kept in memory.
package eventlog

import (
	"context"
	"errors"

	"github.com/evtctl/evtctl/pkg/cursor"
)

// Store is what the node needs of a log. The embedded Log implements it; a backend on a
// distributed engine implements the same contract, so the HTTP layer never changes.
//
// Contract:
//   - Append assigns each entry a cursor greater than every cursor the store handed out
//     before (also across restarts), atomically for the whole slice, and returns only once
//     the entries are durable under the store's sync policy. An entry whose (source, id)
//     was appended within the dedupe window is not appended again; its result carries the
//     original cursor and Duplicate.
//   - Read never blocks on appends for long and never waits for new items.
//   - Changed returns a channel that is closed at the next change of the head (append) or
//     when the store closes. Take it before Read so no append is missed in between.
type Store interface {
	Append(ctx context.Context, entries []Entry) ([]AppendResult, error)
	Read(ctx context.Context, q Query) (Page, error)
	Changed() <-chan struct{}
	Stats() Stats
	Close() error
}

// Entry is one event to append.
type Entry struct {
	Type   string // the CloudEvent type; served as an item's "event"
	Source string // with ID, the key of duplicate suppression
	ID     string
	JSON   []byte // the CloudEvent in JSON format
}

// AppendResult tells where an entry landed.
type AppendResult struct {
	Cursor    cursor.Cursor
	Duplicate bool // an earlier event with the same (source, id) holds Cursor
}

// Item is one event read from the log.
type Item struct {
	Cursor cursor.Cursor
	Type   string
	JSON   []byte
}

// Query selects items for Read. Items eligible are those after After (when set), before
// Before (when set) and accepted by Match (when set).
type Query struct {
	After, Before cursor.Cursor
	Max           int               // at most this many items; <= 0 means 1
	Ascending     bool              // oldest eligible first (false: newest eligible first)
	Match         func([]byte) bool // filter on the event's JSON; nil accepts all
	Budget        int               // most records to examine; 0: no limit
}

// Page is the answer to a Query.
type Page struct {
	Items []Item // in the order the query asked for
	// More reports that at least one further eligible item exists beyond the page: older
	// ones for a newest-first query, newer ones for an ascending one.
	More           bool
	Oldest, Newest cursor.Cursor // the whole log's bounds; empty when the log is empty
	// Resume is set when the read stopped before the end of its range for a reason other
	// than a full page — the budget, or a damaged range: the position a client resumes
	// from: as `after` for an ascending read, as `before` for a newest-first one.
	Resume cursor.Cursor
	// AtLoss: the read stopped at a range lost to damage, and Resume is the record before
	// it. A reader that goes on from Resume is told of the loss (Oldest); one who reads on
	// for it must not, or the loss goes unseen.
	AtLoss bool

	arena arena // memory of Items' JSON, reused after Release
}

// Stats is a snapshot of counters for metrics.
type Stats struct {
	Appended       uint64 // events appended since start
	AppendedBytes  uint64
	Duplicates     uint64 // appends answered from the dedupe window
	Items          uint64 // items retained
	Bytes          uint64 // bytes retained (framing included)
	Segments       int
	DroppedOnOpen  int64 // bytes of torn or corrupt tail truncated when the log was opened
	DedupeEntries  int
	Oldest, Newest cursor.Cursor
	Damage         []Damage // ranges lost to damage within the retained log
	Lost           uint64   // events in those ranges
	Checked        bool     // every record has been read back once since the log was opened
}

// Errors.
var (
	ErrClosed = errors.New("event log is closed")
	// ErrFailed wraps the I/O error that stopped the log; appends fail until it is reopened.
	ErrFailed = errors.New("event log failed")
	// ErrUnavailable is wrapped by errors of a store whose engine cannot serve for now (no
	// connection, no quorum, no leader): the same call may succeed when retried shortly.
	ErrUnavailable = errors.New("event log is unavailable")
	// ErrReadOnly is wrapped by the errors of Append on a store that takes no events by
	// its configuration (a NATS stream evtctl did not write): retrying cannot help.
	ErrReadOnly = errors.New("event log takes no events")
	// ErrRefused is wrapped by the errors of Append when the store's engine refused events
	// for what they are (a NATS stream's limit on a message's size, a stream that keeps no
	// more): retrying the same events cannot help, other events may be taken.
	ErrRefused = errors.New("event log refused the events")
)
