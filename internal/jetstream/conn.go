package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/evtctl/evtctl/internal/eventlog"
)

// mux routes the replies to this store's requests (publish acknowledgements, direct gets)
// through one subscription on a wildcard inbox, rather than one subscription per request.
type mux struct {
	prefix string
	sub    *nats.Subscription

	mu    sync.Mutex
	next  uint64
	chans map[string]chan *nats.Msg
}

func newMux(nc *nats.Conn) (*mux, error) {
	m := &mux{prefix: nc.NewInbox() + ".", chans: map[string]chan *nats.Msg{}}
	sub, err := nc.Subscribe(m.prefix+"*", m.deliver)
	if err != nil {
		return nil, err
	}
	// A page of a replay is up to a few MiB of replies at once; the default limit (64 MiB)
	// would do, but a slow consumer loses replies, so leave room.
	if err := sub.SetPendingLimits(-1, 512<<20); err != nil {
		return nil, err
	}
	m.sub = sub
	return m, nil
}

func (m *mux) deliver(msg *nats.Msg) {
	tok := strings.TrimPrefix(msg.Subject, m.prefix)
	m.mu.Lock()
	ch := m.chans[tok]
	m.mu.Unlock()
	if ch == nil {
		return // a late reply to a request that gave up
	}
	select {
	case ch <- msg:
	default:
		// More replies than the request made room for: it fails by its timeout rather than
		// holding up every other request's replies.
	}
}

// open reserves a reply subject; replies to it arrive on ch until done is called.
func (m *mux) open(room int) (reply string, ch chan *nats.Msg, done func()) {
	ch = make(chan *nats.Msg, room)
	m.mu.Lock()
	m.next++
	tok := strconv.FormatUint(m.next, 36)
	m.chans[tok] = ch
	m.mu.Unlock()
	return m.prefix + tok, ch, func() {
		m.mu.Lock()
		delete(m.chans, tok)
		m.mu.Unlock()
	}
}

// await takes the next reply on ch, giving up after the store's timeout.
func (s *Store) await(ctx context.Context, ch <-chan *nats.Msg, t *time.Timer) (*nats.Msg, error) {
	select {
	case m := <-ch:
		return m, nil
	case <-t.C:
		return nil, unavailable("no reply from NATS within %v", s.opts.Timeout)
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.quit:
		return nil, eventlog.ErrClosed
	}
}

const (
	hdrStatus      = "Status"
	hdrSequence    = "Nats-Sequence"
	hdrTimeStamp   = "Nats-Time-Stamp"
	hdrSubject     = "Nats-Subject"
	hdrNumPending  = "Nats-Num-Pending"
	hdrMsgID       = "Nats-Msg-Id"
	hdrBatchID     = "Nats-Batch-Id"
	hdrBatchSeq    = "Nats-Batch-Sequence"
	hdrBatchCommit = "Nats-Batch-Commit"

	// evtctl's own headers on every message it publishes.
	hdrType  = "Evtctl-Type"  // the CloudEvent's type, served as an item's "event"
	hdrFloor = "Evtctl-Floor" // hex Unix nanoseconds: the newest cursor time the publisher had seen
)

// apiError is JetStream's error object in a reply.
type apiError struct {
	Code        int    `json:"code"`
	ErrCode     int    `json:"err_code"`
	Description string `json:"description"`
}

// pubAck is JetStream's reply to a publish (and to the commit of an atomic batch).
type pubAck struct {
	Stream    string    `json:"stream"`
	Seq       uint64    `json:"seq"`
	Duplicate bool      `json:"duplicate"`
	Batch     string    `json:"batch"`
	Count     int       `json:"count"`
	Error     *apiError `json:"error"`
}

// JetStream error codes evtctl acts on.
const (
	errNoPeers           = 10005 // no suitable peers for placement: the cluster is forming or a server is down
	errClusterNotAvail   = 10008
	errClusterNotLeader  = 10009
	errResources         = 10023
	errNoMessageFound    = 10037
	errStreamNotFound    = 10059
	errStreamOffline     = 10118
	errDupConflict       = 10158
	errTooManyRequests   = 10167
	errAtomicDisabled    = 10174
	errAtomicIncomplete  = 10176
	errAtomicBadHeader   = 10177
	errAtomicTooLarge    = 10199
	errAtomicDuplicate   = 10201
	errAtomicTooInflight = 10210
)

// readAck decodes a publish reply.
func (s *Store) readAck(m *nats.Msg) (pubAck, error) {
	if len(m.Data) == 0 && m.Header.Get(hdrStatus) == "503" {
		return pubAck{}, s.noResponders("events")
	}
	var a pubAck
	if err := json.Unmarshal(m.Data, &a); err != nil {
		return pubAck{}, fmt.Errorf("NATS JetStream: an acknowledgement that is not JSON: %q", m.Data)
	}
	if a.Error != nil {
		return a, s.apiErr(a.Error)
	}
	return a, nil
}

// jsError is a refusal from JetStream that retrying will not fix.
type jsError struct{ e apiError }

// Is makes a refusal an eventlog.ErrRefused.
func (e *jsError) Is(target error) bool { return target == eventlog.ErrRefused }

func (e *jsError) Error() string {
	return fmt.Sprintf("NATS JetStream refused: %s (error %d)", e.e.Description, e.e.ErrCode)
}

func (s *Store) apiErr(e *apiError) error {
	switch e.ErrCode {
	case errNoPeers, errClusterNotAvail, errClusterNotLeader, errStreamOffline, errResources, errTooManyRequests,
		errAtomicIncomplete, errAtomicTooInflight, errDupConflict:
		return unavailable("NATS JetStream stream %q: %s", s.opts.Stream, e.Description)
	case errStreamNotFound:
		return &missingError{s.opts.Stream}
	}
	if e.Code == 503 {
		return unavailable("NATS JetStream stream %q: %s", s.opts.Stream, e.Description)
	}
	return &jsError{*e}
}

// noResponders explains a request nobody answered: the stream is missing, or (clustered)
// has no leader right now, or none of its replicas serves direct gets.
func (s *Store) noResponders(what string) error {
	if st := s.streamStatus(); st != nil {
		return unavailable("nothing answers %s on NATS JetStream stream %q: %v", what, s.opts.Stream, st)
	}
	return unavailable("nothing answers %s on NATS JetStream stream %q: it is missing, or it has no leader right now", what, s.opts.Stream)
}

// connErr classifies an error of the NATS connection itself.
func (s *Store) connErr(err error) error {
	switch {
	case errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrConnectionDraining):
		if s.closing.Load() {
			return eventlog.ErrClosed
		}
		return unavailable("the connection to NATS is closed")
	case errors.Is(err, nats.ErrConnectionReconnecting), errors.Is(err, nats.ErrReconnectBufExceeded):
		return unavailable("not connected to NATS (reconnecting)")
	case errors.Is(err, nats.ErrNoResponders):
		return s.noResponders("requests")
	case errors.Is(err, nats.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return unavailable("no reply from NATS in time: %v", err)
	}
	return fmt.Errorf("NATS: %w", err)
}

// missingError says the stream does not exist; it is worth retrying, as a managed stream
// is created again and an operator may create it meanwhile.
type missingError struct{ stream string }

func (e *missingError) Error() string {
	return fmt.Sprintf("%v: NATS JetStream stream %q does not exist", eventlog.ErrUnavailable, e.stream)
}

func (e *missingError) Unwrap() error { return eventlog.ErrUnavailable }

// unavailable is an error worth retrying shortly.
func unavailable(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{eventlog.ErrUnavailable}, args...)...)
}
