// Package jetstream keeps an evtctl node's event log in a NATS JetStream stream, so that
// several nodes serve one log, replicated by JetStream. Store implements eventlog.Store.
//
// Every event is one message of the stream, in JSON format, on one subject. Its cursor
// comes from the stream itself, so every node in front of the stream hands out the same
// cursor for the same event: the sequence part is the stream sequence, the timestamp part
// the time in the message's Evtctl-Time header, which the publishing node chose as it
// chained the message to the one before it (see chain.go). A message without one (stored
// by another writer, or by a node in shared mode) has its stored time, raised to its
// Evtctl-Floor header (the newest cursor time the publishing node had seen), so that it
// does not go backwards when a new stream leader's clock is behind the old one's. Cursors
// this store handed out are found again by their sequence; other positions (a time, a
// cursor of another log) by binary search.
//
// A stream evtctl did not write is served too: each message is presented as a CloudEvent
// (see Store.present), and such a node takes no events unless given a subject to publish
// them on.
//
// Long reads stream from consumers of their own (see reader.go), short ones and lookups
// are direct gets (see source.go); a node learns of its own messages from their
// acknowledgements, and wakes its waiting readers from one ordered consumer of its own
// (headers only), which runs while readers wait or the node publishes in shared mode, and
// tells it of other writers' messages (else its look at the stream, once a second, does). It works with nats-server 2.10
// and later, using what each server line adds (batched direct gets in 2.11, atomic batch
// publish in 2.12) when the server it is connected to has it.
package jetstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/evtctl/evtctl/internal/eventlog"
	"github.com/evtctl/evtctl/internal/retry"
	"github.com/evtctl/evtctl/pkg/cursor"
)

// Options configure a Store. Zero values take the defaults noted.
type Options struct {
	URL    string // NATS server URLs, comma separated
	Stream string // stream name; default "EVTCTL"
	// Subject is the subject ingested events are published on; default "evtctl.<stream in
	// lower case>". On a stream the node does not manage, which does not take the default
	// subject, the node takes no events unless Subject names one the stream takes.
	Subject  string
	Replicas int // stream replicas; default 1

	// Retention, applied as the stream's limits.
	Window       time.Duration // max age; 0: no limit
	MaxItems     uint64        // max messages; 0: no limit
	MaxBytes     int64         // max bytes; 0: no limit
	DedupeWindow time.Duration // the stream's duplicates window; 0: 10 minutes; < 0: no duplicate suppression

	// Manage creates the stream when it is missing and brings its limits and replicas to
	// these options when they differ. Without it the stream must exist and is used as it is.
	Manage bool

	Timeout     time.Duration // for each request to NATS; default 5s
	StartupWait time.Duration // how long Open waits for NATS and the stream; default 30s
	NATSOptions []nats.Option // credentials, TLS, ...
	Logger      *slog.Logger

	// Batches chooses how the events of one Append are stored when the stream and the
	// server take atomic batches (nats-server 2.12 or later); see Batches.
	Batches Batches
	// MaxBatches bounds the atomic batches this node has in flight at once (the server
	// takes at most 50 per stream from all nodes together); default 8.
	MaxBatches int
}

// Batches chooses how the events of one Append are stored.
type Batches int

const (
	// BatchesAuto stores them as atomic batches on a replicated stream, where a batch is
	// one proposal to the replicas (all-or-nothing, and measured faster than the events
	// one by one), and event by event, pipelined, on a single-replica stream, where the
	// server stages each atomic batch in files of its own (measured about a quarter
	// slower).
	BatchesAuto Batches = iota
	// BatchesAtomic stores them as atomic batches: all or nothing.
	BatchesAtomic
	// BatchesEach stores them event by event, pipelined.
	BatchesEach
)

const (
	defaultStream       = "EVTCTL"
	defaultDedupeWindow = 10 * time.Minute
	maxAtomicBatch      = 1000 // the server's default limit on messages per atomic batch
	pollEvery           = time.Second
)

// Store is an eventlog.Store on a NATS JetStream stream.
type Store struct {
	opts    Options
	log     *slog.Logger
	nc      *nats.Conn
	js      jetstream.JetStream
	pubs    *publisher // of the node's appends
	mux     *mux
	subject string
	// subjectGiven: Options.Subject was set, so the stream must take it
	subjectGiven bool
	getSubj      string
	source       string // of the events wrapped from foreign messages
	dedupe       bool
	atomic       atomic.Bool // the stream takes atomic batches
	batches      chan struct{}
	rd           readers
	readerMinFor atomic.Uint64 // replaces readerMin when set (tests)

	capsV      atomic.Pointer[caps]
	directOK   atomic.Bool // the stream allows direct gets
	perSubject atomic.Bool // the stream keeps a number of messages per subject: holes are its retention
	keyed      atomic.Bool // perSubject, and no limit removes messages from the front: neither do front moves lose events
	replicated atomic.Bool // the stream has more than one replica
	str        atomic.Pointer[jetstream.Stream]
	recheck    atomic.Bool // the connection was made again: look at the server's version

	tr    tracker
	chain chain
	clock serverClock

	mu        sync.Mutex
	state     jetstream.StreamState // from the last stream info
	created   time.Time             // when the stream followed was created: another time means it was recreated
	status    error                 // why the stream cannot serve now, from the last look; nil when it can
	readErr   error                 // why the last read failed; nil once one succeeds
	refused   error                 // the server connected to is too old
	writeErr  error                 // why the node takes no events (a stream it did not write), or nil
	oldest    oldestCache
	restart   chan struct{} // asks the watcher to start over (the stream was recreated)
	lookNow   chan struct{} // asks the poller to look at the stream at once
	wantCons  chan struct{} // asks watch to look whether its consumer is needed
	interest  atomic.Int64  // when a reader last called Changed (Unix nanoseconds)
	consuming atomic.Bool   // the ordered consumer runs
	others    atomic.Int64  // when another writer's message was last seen (Unix nanoseconds)
	headLook  atomic.Int64  // when a read last looked at the stream's head (Unix nanoseconds)
	// checked: a look at the stream since Open found it serving, its state read and, when
	// it held messages, a read of it answered (see look); /healthz says "checked"
	checked atomic.Bool

	closeMu sync.RWMutex // held for reading by calls in progress, for writing by Close
	closing atomic.Bool
	quit    chan struct{}
	bg      sync.WaitGroup

	appended, appendedBytes, duplicates atomic.Uint64
}

var _ eventlog.Store = (*Store)(nil)

// Open connects to NATS, makes sure the stream exists (creating or updating it when
// opts.Manage is set) and starts following it. It waits up to opts.StartupWait for NATS to
// be reachable and the stream to have a leader.
func Open(ctx context.Context, opts Options) (*Store, error) {
	if opts.Stream == "" {
		opts.Stream = defaultStream
	}
	subjectGiven := opts.Subject != ""
	if opts.Subject == "" {
		opts.Subject = "evtctl." + strings.ToLower(opts.Stream)
	}
	if opts.Replicas <= 0 {
		opts.Replicas = 1
	}
	if opts.DedupeWindow == 0 {
		opts.DedupeWindow = defaultDedupeWindow
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	if opts.StartupWait <= 0 {
		opts.StartupWait = 30 * time.Second
	}
	if opts.MaxBatches <= 0 {
		opts.MaxBatches = 8
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Stream == "" || strings.ContainsAny(opts.Stream, ". *>/\\\t") {
		return nil, fmt.Errorf("NATS stream name %q: it may not contain '.', '*', '>', slashes or spaces", opts.Stream)
	}
	if strings.ContainsAny(opts.Subject, "*> \t") || strings.HasPrefix(opts.Subject, ".") || strings.HasSuffix(opts.Subject, ".") || strings.Contains(opts.Subject, "..") {
		return nil, fmt.Errorf("NATS subject %q: events need one plain subject, without wildcards, spaces or empty tokens", opts.Subject)
	}
	s := &Store{
		opts:     opts,
		log:      opts.Logger,
		subject:  opts.Subject,
		getSubj:  "$JS.API.DIRECT.GET." + opts.Stream,
		source:   sourceOf(opts.Stream),
		dedupe:   opts.DedupeWindow > 0,
		batches:  make(chan struct{}, opts.MaxBatches),
		restart:  make(chan struct{}, 1),
		lookNow:  make(chan struct{}, 1),
		wantCons: make(chan struct{}, 1),
		quit:     make(chan struct{}),
	}
	s.tr.init()
	sctx, cancel := context.WithTimeout(ctx, opts.StartupWait)
	defer cancel()
	if err := s.connect(sctx); err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			close(s.quit)
			s.nc.Close()
		}
	}()
	c, err := capsOf(s.nc.ConnectedServerVersion())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Redact(s.nc.ConnectedUrlRedacted()), err)
	}
	s.capsV.Store(&c)
	if s.js, err = jetstream.New(s.nc); err != nil {
		return nil, err
	}
	if s.pubs, err = newPublisher(s); err != nil {
		return nil, fmt.Errorf("NATS: %w", err)
	}
	s.subjectGiven = subjectGiven
	if s.mux, err = newMux(s.nc); err != nil {
		return nil, fmt.Errorf("NATS: %w", err)
	}
	if err := s.untilReady(sctx, "the stream", s.ensureStream); err != nil {
		return nil, err
	}
	if err := s.untilReady(sctx, "the stream's head", s.loadHead); err != nil {
		return nil, err
	}
	s.bg.Add(2)
	go func() { defer s.bg.Done(); s.watch() }()
	go func() { defer s.bg.Done(); s.poll() }()
	ok = true
	return s, nil
}

// connect dials NATS, retrying while no server answers.
func (s *Store) connect(ctx context.Context) error {
	nopts := []nats.Option{
		nats.Name("evtctl serve"),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.ReconnectJitter(250*time.Millisecond, time.Second),
		// Fail publishes while reconnecting instead of buffering them: the producer gets a
		// 503 and retries, and a retry is answered from the duplicates window.
		nats.ReconnectBufSize(-1),
		nats.Timeout(s.opts.Timeout),
		nats.PingInterval(10 * time.Second),
		nats.MaxPingsOutstanding(3),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if !s.closing.Load() {
				s.log.Warn("disconnected from NATS; reconnecting", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			s.log.Info("reconnected to NATS", "url", nc.ConnectedUrlRedacted(), "version", nc.ConnectedServerVersion())
			s.recheck.Store(true)
			select {
			case s.lookNow <- struct{}{}:
			default:
			}
		}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			s.log.Warn("NATS", "err", err)
		}),
	}
	nopts = append(nopts, s.opts.NATSOptions...)
	wait := 100 * time.Millisecond
	for {
		nc, err := nats.Connect(s.opts.URL, nopts...)
		if err == nil {
			s.nc = nc
			return nil
		}
		if !errors.Is(err, nats.ErrNoServers) && !errors.Is(err, nats.ErrTimeout) {
			return fmt.Errorf("connecting to NATS at %s: %w", Redact(s.opts.URL), err)
		}
		s.log.Debug("NATS not reachable yet", "url", Redact(s.opts.URL), "err", err)
		if retry.Sleep(ctx, wait) != nil {
			return fmt.Errorf("cannot reach NATS at %s: %w", Redact(s.opts.URL), err)
		}
		wait = min(2*wait, time.Second)
	}
}

// Redact hides passwords and tokens in NATS URLs.
func Redact(urls string) string {
	parts := strings.Split(urls, ",")
	for i, u := range parts {
		if at := strings.LastIndexByte(u, '@'); at >= 0 {
			if sch := strings.Index(u, "://"); sch >= 0 && sch < at {
				parts[i] = u[:sch+3] + "***" + u[at:]
			}
		}
	}
	return strings.Join(parts, ",")
}

// untilReady calls fn until it succeeds, retrying while the stream is unavailable (a
// cluster that is still electing its leaders), until ctx ends.
func (s *Store) untilReady(ctx context.Context, what string, fn func(context.Context) error) error {
	wait := 100 * time.Millisecond
	for {
		err := fn(ctx)
		if err == nil {
			return nil
		}
		if !errors.Is(err, eventlog.ErrUnavailable) || ctx.Err() != nil {
			return err
		}
		s.log.Debug("waiting for NATS JetStream", "for", what, "err", err)
		if retry.Sleep(ctx, wait) != nil {
			return fmt.Errorf("NATS JetStream: %s was not ready in time: %w", what, err)
		}
		wait = min(2*wait, time.Second)
	}
}

// jsErr classifies an error of the JetStream management API.
func (s *Store) jsErr(err error) error {
	var ae *jetstream.APIError
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return &missingError{s.opts.Stream}
	case errors.Is(err, jetstream.ErrJetStreamNotEnabled), errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount):
		return fmt.Errorf("NATS JetStream is not enabled on the server (or for this account): %w", err)
	case errors.As(err, &ae):
		return s.apiErr(&apiError{Code: ae.Code, ErrCode: int(ae.ErrorCode), Description: ae.Description})
	case errors.Is(err, jetstream.ErrNoStreamResponse), errors.Is(err, nats.ErrNoResponders):
		return unavailable("NATS JetStream does not answer (no quorum, or still starting)")
	}
	return s.connErr(err)
}

// loadHead learns the stream's newest message, and its oldest, from the stream itself.
func (s *Store) loadHead(ctx context.Context) error {
	info, err := s.info(ctx)
	if err != nil {
		return err
	}
	st := info.State
	last, ts := st.LastSeq, int64(0)
	if last > 0 {
		m, ok, err := s.first(ctx, last)
		if err != nil {
			return err
		}
		if ok && m.seq == last {
			ts = m.ts
		} else {
			// Retention removed it: its stored time is all there is.
			ts = st.LastTime.UnixNano()
		}
	}
	s.tr.reset(last, ts)
	s.mu.Lock()
	s.state, s.created = st, info.Created
	s.mu.Unlock()
	_, _, err = s.refreshOldest(ctx)
	return err
}

// info fetches the stream's configuration and state.
func (s *Store) info(ctx context.Context) (*jetstream.StreamInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	sent := time.Now()
	str, err := s.js.Stream(ctx, s.opts.Stream)
	if err != nil {
		return nil, s.jsErr(err)
	}
	s.str.Store(&str)
	info := str.CachedInfo()
	s.clock.note(info.TimeStamp, sent)
	s.noteConfig(info.Config)
	return info, nil
}

// noteConfig notes the settings of the stream that decide how it is read.
func (s *Store) noteConfig(cfg jetstream.StreamConfig) {
	s.directOK.Store(cfg.AllowDirect)
	s.replicated.Store(cfg.Replicas > 1)
	s.perSubject.Store(cfg.MaxMsgsPerSubject > 0)
	// Age removes messages from the front whatever the discard policy; a message or byte
	// limit does with discard old (with discard new it refuses new messages instead).
	front := cfg.MaxAge > 0 || cfg.Discard == jetstream.DiscardOld && (cfg.MaxMsgs > 0 || cfg.MaxBytes > 0)
	s.keyed.Store(cfg.MaxMsgsPerSubject > 0 && !front)
}

// streamHandle is the stream as last looked up; nil before the first look.
func (s *Store) streamHandle() jetstream.Stream {
	if p := s.str.Load(); p != nil {
		return *p
	}
	return nil
}

// caps is what the server connected to can do.
func (s *Store) caps() caps { return *s.capsV.Load() }

// direct reports whether the stream allows direct gets.
func (s *Store) direct() bool { return s.directOK.Load() }

// holesLost reports whether messages missing from the middle of the stream are events lost
// to its readers (see Read).
func (s *Store) holesLost() bool { return !s.perSubject.Load() }

// refusal is why the node cannot use the server it is connected to, or nil.
func (s *Store) refusal() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

// noteRead keeps the outcome of a read for /healthz: reads that fail make the node fail.
func (s *Store) noteRead(ctx context.Context, err error) {
	if err != nil && (ctx.Err() != nil || errors.Is(err, eventlog.ErrClosed) || errors.Is(err, context.Canceled)) {
		return
	}
	s.mu.Lock()
	prev := s.readErr
	s.readErr = err
	s.mu.Unlock()
	switch {
	case err != nil && prev == nil:
		s.log.Warn("reading the NATS JetStream stream failed", "stream", s.opts.Stream, "err", err)
	case err == nil && prev != nil:
		s.log.Info("reads from the NATS JetStream stream work again", "stream", s.opts.Stream)
	}
}

func (s *Store) setState(st jetstream.StreamState) {
	s.mu.Lock()
	s.state = st
	s.mu.Unlock()
}

// Describe says where the log is, for people: stream, subject, servers, replicas.
func (s *Store) Describe() string {
	subj := "subject " + s.subject + ", batches one by one"
	if s.atomic.Load() {
		subj = "subject " + s.subject + ", atomic batches"
	}
	if s.writeError() != nil {
		subj = "read-only: a stream evtctl did not write"
	}
	return fmt.Sprintf("NATS JetStream stream %s (%s, R%d) at %s, nats-server %s", s.opts.Stream, subj, s.opts.Replicas,
		Redact(s.nc.ConnectedUrlRedacted()), s.caps().version)
}

// writeError is why the node takes no events, or nil.
func (s *Store) writeError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writeErr
}

// streamStatus is what the last look at the stream found wrong, if anything.
func (s *Store) streamStatus() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status
}

// Changed implements eventlog.Store: the channel is closed when this node learns of a new
// message in the stream (from any node), or when the store closes.
// A call says a reader may wait: the node follows the stream (see watch) while readers do.
func (s *Store) Changed() <-chan struct{} {
	now := time.Now().UnixNano()
	if prev := s.interest.Swap(now); time.Duration(now-prev) >= interestFor/2 {
		s.wantConsumer()
	}
	return s.tr.changedChan()
}

// Stats implements eventlog.Store. Counts of the stream come from its last stream info
// (at most about a second old), moved on by the messages this node has seen since.
func (s *Store) Stats() eventlog.Stats {
	last, lastTS := s.tr.head()
	s.mu.Lock()
	st := s.state
	o := s.oldest
	s.mu.Unlock()
	stats := eventlog.Stats{
		Appended:      s.appended.Load(),
		AppendedBytes: s.appendedBytes.Load(),
		Duplicates:    s.duplicates.Load(),
		Items:         st.Msgs,
		Bytes:         st.Bytes,
		Checked:       s.checked.Load(),
	}
	if last > st.LastSeq {
		stats.Items += last - st.LastSeq
		if m := s.opts.MaxItems; m > 0 {
			stats.Items = min(stats.Items, m)
		}
	}
	if last > 0 {
		stats.Newest = cursor.New(lastTS, last, cursor.NodeWidth)
	}
	switch {
	case o.seq > 0 && !o.empty:
		stats.Oldest = cursor.New(o.ts, o.seq, cursor.NodeWidth)
	case o.empty && last >= o.seq:
		// The stream was empty at the last look; the first message since is the oldest.
		if ts, ok := s.tr.lookup(o.seq); ok {
			stats.Oldest = cursor.New(ts, o.seq, cursor.NodeWidth)
		}
	}
	return stats
}

// Failed reports why the node cannot use the stream now (not connected, a server too old,
// stream missing, no quorum, reads failing), or nil; the node's /healthz answers 503 while
// it is not nil.
func (s *Store) Failed() error {
	if s.closing.Load() {
		return eventlog.ErrClosed
	}
	if !s.nc.IsConnected() {
		return unavailable("not connected to NATS")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.refused != nil:
		return s.refused
	case s.status != nil:
		return s.status
	case s.readErr != nil:
		return fmt.Errorf("reads fail: %w", s.readErr)
	}
	return nil
}

// Close stops following the stream, wakes waiting readers and closes the connection.
// Appends in progress finish first (or fail by their timeout).
func (s *Store) Close() error {
	if s.closing.Swap(true) {
		return nil
	}
	s.closeMu.Lock()
	close(s.quit)
	s.closeMu.Unlock()
	s.reapReaders(true)
	s.bg.Wait()
	s.tr.close()
	s.nc.Close()
	return nil
}

// enter marks a call in progress; false when the store is closed.
func (s *Store) enter() bool {
	s.closeMu.RLock()
	if s.closing.Load() {
		s.closeMu.RUnlock()
		return false
	}
	return true
}

func (s *Store) leave() { s.closeMu.RUnlock() }
