// Package forward delivers a log's events to a webhook, one POST per event, with retry tiers,
// fairness between new and retried events, a durable retry store and a checkpoint that never
// passes an event that was not delivered, dead-lettered or stored for a retry.
//
// Events are read in log order. Each is sent as a CloudEvent (Target.Mode) through
// deliver's Client, whose deliver.WebhookPolicy says what a reply means: a 2xx delivers it;
// 500, 502, 503, 504, 429 and transport failures move it to the next retry tier, to be
// tried again when that tier's delay has passed (or the reply's Retry-After, when that is
// later); after the last tier, or MaxAttempts, it is dead-lettered, as is an event answered
// with any other status. 410 Gone stops forwarding for good; a receiver that has not
// answered in the run and cannot be reached at all stops it at once (UnreachableError).
// Events waiting in a tier never hold up the others: a free delivery slot goes in turn to a
// new event and to a retry that is due, and a retry waits only for its own time.
//
// Crash safety. Every outcome is written (the dead-letter file, fsynced, then the journal)
// before its delivery slot is freed, and the checkpoint is the cursor before which every
// event is settled; the journal is fsynced for each outcome (SyncAlways) or at the latest
// before each checkpoint (SyncCheckpoint). After a crash, the events after the checkpoint
// are read again and those the journal records as settled are skipped, so the only events
// sent twice are those whose delivery was in flight: at most Concurrency of them. (With
// SyncCheckpoint, a power loss can also repeat the deliveries since the last checkpoint.)
package forward

import (
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/tidwall/gjson"

	"github.com/evtctl/evtctl/internal/deliver"
	"github.com/evtctl/evtctl/internal/english"
	"github.com/evtctl/evtctl/internal/peer"
	"github.com/evtctl/evtctl/pkg/cursor"
)

// Defaults.
const (
	DefaultMaxPending         = 10000
	DefaultWindow             = 4096
	DefaultCheckpointInterval = 200 * time.Millisecond
	// DefaultGrace is short: Ctrl-C ends forward at once; an attempt that has not come back
	// by then is sent again by the next run, as after a crash.
	DefaultGrace = 50 * time.Millisecond
)

// Event is one item read from the log.
type Event struct {
	Cursor string
	// Pos is the position right after the event, where it is not the cursor (a log of
	// partitions): what the checkpoint records once the event and those before it are
	// settled. "" means Cursor.
	Pos string
	// Data is the CloudEvent in JSON format. Nil marks a position only: everything up to
	// Cursor (or Pos) has been read and nothing there is to be delivered (the checkpoint may
	// pass it).
	Data []byte
}

// position is where a reader stands once the event is settled.
func (e Event) position() string {
	if e.Pos != "" {
		return e.Pos
	}
	return e.Cursor
}

// Options configure a Forwarder.
type Options struct {
	Target Target
	// Order orders the log's cursors and positions (the client's Compare); nil orders
	// them as the events method's cursors are ordered.
	Order func(a, b string) int
	// Delays are the retry tiers' maturity delays: an event that failed n times waits
	// Delays[n-1] (the last one once n is past the list). Nil means DefaultDelays.
	Delays []time.Duration
	// MaxAttempts bounds the attempts per event, the first included; 0 means one per tier
	// and the first: len(Delays)+1.
	MaxAttempts int
	// Concurrency is how many deliveries may be in flight at once; default 1.
	Concurrency int
	// Ordered delivers strictly in log order, one at a time: an event that fails is retried
	// on its tiers' schedule before any later event is sent.
	Ordered bool
	// Window bounds how many events may be read ahead of the checkpoint; default
	// DefaultWindow (at least 4×Concurrency).
	Window int
	// MaxPending bounds the events waiting in the retry store: when it is full, reading new
	// events pauses until some are settled. Default DefaultMaxPending.
	MaxPending int
	// State is the durable state; nil keeps everything in memory.
	State *State
	// Sync says when the journal is fsynced. SyncAlways: every outcome, before its delivery
	// slot is freed, so that even after a power loss only deliveries in flight are repeated.
	// SyncCheckpoint: before each checkpoint is saved; outcomes are written at once (a
	// crash of the process loses none), but a power loss may repeat the deliveries since the
	// last checkpoint. Either way the checkpoint never passes an event whose outcome is not
	// on disk, and dead letters are always fsynced at once.
	Sync SyncMode
	// DeadLetter is a file that events given up on are appended to, as JSON lines; "" for none.
	DeadLetter string
	// Checkpoint saves the checkpoint: every event up to and including cursor is settled.
	// It is called from one goroutine, at most every CheckpointInterval and on the way out.
	Checkpoint         func(cursor string) error
	CheckpointInterval time.Duration
	// Grace is how long deliveries in flight may finish once ctx ends; then they are
	// abandoned (and sent again by the next run). Default DefaultGrace.
	Grace time.Duration
	// OnResult is told of every attempt once its outcome is durable, from one goroutine. An
	// error stops the forwarder.
	OnResult func(Result) error
}

// SyncMode says when the journal is fsynced; see Options.Sync.
type SyncMode int

// Sync modes.
const (
	SyncAlways SyncMode = iota
	SyncCheckpoint
)

// Outcome is what became of an attempt.
type Outcome string

// Outcomes.
const (
	OutcomeDelivered  Outcome = "delivered"
	OutcomeRetry      Outcome = "retry"       // failed; stored to be tried again at NextAttempt
	OutcomeDeadLetter Outcome = "dead-letter" // given up on
	OutcomeGone       Outcome = "gone"        // the receiver answered 410 Gone
)

// Result describes one attempt.
type Result struct {
	Outcome     Outcome
	Cursor      string
	ID          string
	Source      string
	Type        string
	Status      int           // the reply's status; 0 when there was none
	Latency     time.Duration // of this attempt
	Attempt     int           // 1 for the first
	Tier        int           // OutcomeRetry: the tier the event now waits in (1 for the first)
	NextAttempt time.Time     // OutcomeRetry: when it will be tried again
	RetryIn     time.Duration // OutcomeRetry: the wait chosen: the tier's delay, or a later Retry-After
	Reason      string        // what went wrong, or the receiver's message
	Redirects   int           // redirects followed
}

// GoneError reports a receiver that answered 410 Gone, now or in an earlier run.
type GoneError struct {
	Record GoneRecord
	Path   string // the file that records it; "" without a state directory
}

func (e *GoneError) Error() string {
	msg := fmt.Sprintf("the receiver %s answered 410 Gone", e.Record.Target)
	if !e.Record.Time.IsZero() {
		msg += " at " + e.Record.Time.UTC().Format(time.RFC3339)
	}
	if e.Record.ID != "" {
		msg += " (to event " + e.Record.ID + ")"
	}
	if e.Record.Reason != "" {
		msg += ": " + e.Record.Reason
	}
	msg += "; it takes no more events, so forwarding has stopped for good"
	if e.Path != "" {
		msg += ". To forward to it again, remove " + e.Path
	}
	return msg
}

// UnreachableError reports a receiver that has not answered in this run and cannot be
// reached at all: nothing listens at its address, its host name does not resolve, TLS does
// not fit. Waiting does not mend that (a person has to start the receiver or fix its URL), so
// forwarding stops at once, as emit does; the event is left as it was (not dead-lettered, not
// passed by the checkpoint), and the next run sends it. A receiver that has answered once is
// retried as any failure is (it may be restarting).
type UnreachableError struct {
	Target string
	Err    error // the transport failure
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot reach the receiver %s: %v", e.Target, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// DeadLetter is one line of the dead-letter file.
type DeadLetter struct {
	Time     time.Time       `json:"time"`
	Target   string          `json:"target"`
	Cursor   string          `json:"cursor"`
	ID       string          `json:"id"`
	Source   string          `json:"source,omitempty"`
	Type     string          `json:"type,omitempty"`
	Status   int             `json:"status"`
	Reason   string          `json:"reason"`
	Attempts int             `json:"attempts"`
	Event    json.RawMessage `json:"event,omitempty"`
}

// Forwarder forwards events to one target.
type Forwarder struct {
	opts   Options
	policy deliver.Policy // the webhook's, with the tiers as its backoff
	sender *sender
}

// New checks opts and returns a Forwarder.
func New(opts Options) (*Forwarder, error) {
	if opts.Delays == nil {
		opts.Delays = DefaultDelays
	}
	if len(opts.Delays) == 0 {
		return nil, errors.New("no retry delays")
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = len(opts.Delays) + 1
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 1
	}
	if opts.Ordered {
		opts.Concurrency = 1
	}
	if opts.Window <= 0 {
		opts.Window = DefaultWindow
	}
	opts.Window = max(opts.Window, 4*opts.Concurrency)
	if opts.MaxPending <= 0 {
		opts.MaxPending = DefaultMaxPending
	}
	if opts.CheckpointInterval <= 0 {
		opts.CheckpointInterval = DefaultCheckpointInterval
	}
	if opts.Grace <= 0 {
		opts.Grace = DefaultGrace
	}
	if opts.State != nil && opts.Checkpoint == nil {
		return nil, errors.New("a State needs a Checkpoint: the journal is pruned as the checkpoint moves")
	}
	if opts.Order == nil {
		opts.Order = cursor.CompareText
	}
	if opts.State != nil {
		opts.State.order = opts.Order
	}
	policy := deliver.WebhookPolicy()
	policy.Backoff = deliver.Backoff{Tiers: opts.Delays, MaxAttempts: opts.MaxAttempts}
	policy.FirstContactFinal = true // see UnreachableError
	s, err := newSender(opts.Target, opts.Concurrency, policy)
	if err != nil {
		return nil, err
	}
	return &Forwarder{opts: opts, policy: policy, sender: s}, nil
}

// Target returns the receiver's URL, without a password.
func (f *Forwarder) Target() string { return f.sender.where() }

// delivery is an event on its way.
type delivery struct {
	cursor          string
	event           []byte
	id, source, typ string
	seq             uint64 // its place in the tracker, while tracked
	tracked         bool   // counted in the tracker and not yet settled there
	stored          bool   // in the durable retry store
	tier            int    // 0 until it first fails
	attempts        int    // made so far
	due             time.Time
}

func newDelivery(cursor string, event []byte) *delivery {
	d := &delivery{cursor: cursor, event: event}
	r := gjson.GetManyBytes(event, "id", "source", "type")
	d.id, d.source, d.typ = r[0].String(), r[1].String(), r[2].String()
	return d
}

// outcome is a settled attempt on its way to durable storage.
type outcome struct {
	d       *delivery
	res     deliver.Attempt
	outcome Outcome
	tier    int
	due     time.Time
	wait    time.Duration
	rec     *record // for the journal
	dead    []byte  // a dead-letter line
}

type workResult struct {
	d   *delivery
	res deliver.Attempt
}

type persistReq struct {
	items      []*outcome
	checkpoint string
	gone       *GoneRecord
}

type persistAck struct {
	req persistReq
	err error
}

// run is the state of one Run, owned by its loop goroutine.
type run struct {
	f    *Forwarder
	opts *Options

	tr    tracker
	retry retryHeap
	skip  map[string]bool // settled events the log will show again after a restart

	peek     *delivery // a new event read and not yet sent
	slots    int       // deliveries started and not yet durably settled
	running  int       // attempts under way
	results  chan workResult
	queue    []*outcome // settled, waiting to be made durable
	busy     bool       // a persist request is out
	reqs     chan persistReq
	acks     chan persistAck
	saved    string // the checkpoint saved last
	lastSave time.Time

	pausedUntil time.Time // a 429 asked for a pause
	freshLast   bool      // the last slot went to a new event (fairness)
	srcClosed   bool

	answered bool // the receiver has answered an attempt of this run (with any status)
	stopping bool
	stopErr  error
	fatal    error // persisting failed: nothing more can be made durable
	graceEnd time.Time
	gone     *GoneRecord // to be recorded
	wentGone bool
	work     context.Context
	abandon  context.CancelFunc
}

// Run forwards the events read from src until ctx ends, the receiver answers 410 Gone, an
// outcome cannot be made durable, or src is closed and every event read has been delivered
// or dead-lettered (pending retries included). It returns nil only in the last case;
// context.Cause(ctx) when ctx ended; a *GoneError after a 410.
func (f *Forwarder) Run(ctx context.Context, src <-chan Event) error {
	opts := &f.opts
	if st := opts.State; st != nil {
		if g, err := st.Gone(); err != nil {
			return err
		} else if g != nil {
			return &GoneError{Record: *g, Path: st.GonePath()}
		}
	}
	var dl *deadLetters
	if opts.DeadLetter != "" {
		var err error
		if dl, err = openDeadLetters(opts.DeadLetter); err != nil {
			return err
		}
		defer dl.close()
	}
	r := &run{
		f: f, opts: opts, skip: map[string]bool{}, retry: retryHeap{order: opts.Order},
		results: make(chan workResult, opts.Concurrency),
		reqs:    make(chan persistReq), acks: make(chan persistAck),
	}
	r.work, r.abandon = context.WithCancel(context.WithoutCancel(ctx))
	defer r.abandon()
	if st := opts.State; st != nil {
		live, done := st.entries()
		for _, e := range live {
			d := newDelivery(e.Cursor, e.Event)
			d.stored, d.tier, d.attempts, d.due = true, e.Tier, e.Attempts, e.Due
			heap.Push(&r.retry, d)
			r.skip[e.Cursor] = true
		}
		for c := range done {
			r.skip[c] = true
		}
	}
	go f.persister(r.reqs, r.acks, dl)
	defer close(r.reqs)
	return r.loop(ctx, src)
}

func (r *run) loop(ctx context.Context, src <-chan Event) error {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := time.Now()
		if r.stopping && !r.abandoned() && !now.Before(r.graceEnd) {
			r.abandonWork()
		}
		if !r.stopping {
			r.dispatch(now)
		}
		if done, err := r.finished(); done {
			return err
		}

		var srcC <-chan Event
		if !r.stopping && !r.srcClosed && r.peek == nil && r.tr.len() < r.opts.Window && r.retry.Len() < r.opts.MaxPending {
			srcC = src
		}
		var reqC chan<- persistReq
		var req persistReq
		if !r.busy && r.fatal == nil {
			req = persistReq{items: r.queue, gone: r.gone, checkpoint: r.checkpointDue(now)}
			if len(req.items) > 0 || req.gone != nil || req.checkpoint != "" {
				reqC = r.reqs
			}
		}
		var ctxDone <-chan struct{}
		if !r.stopping {
			ctxDone = ctx.Done()
		}
		timer.Reset(r.nextWake(now))

		select {
		case ev, ok := <-srcC:
			if !ok {
				r.srcClosed = true
			} else {
				r.receive(ev)
			}
		case wr := <-r.results:
			r.settle(wr, time.Now())
		case reqC <- req:
			r.busy = true
			r.queue = nil
			if req.gone != nil {
				r.gone = nil
			}
		case ack := <-r.acks:
			r.busy = false
			if err := r.acked(ack); err != nil {
				r.fatal = err
				r.stop(err, true)
			}
		case <-timer.C:
		case <-ctxDone:
			r.stop(context.Cause(ctx), false)
		}
	}
}

// stop begins the way out: nothing new is started; attempts under way get the grace period
// (none when now is set).
func (r *run) stop(err error, now bool) {
	if !r.stopping {
		r.stopping, r.stopErr = true, err
		r.graceEnd = time.Now().Add(r.opts.Grace)
	}
	if now {
		r.abandonWork()
	}
}

func (r *run) abandonWork() { r.abandon() }

// abandoned reports whether the attempts under way were abandoned.
func (r *run) abandoned() bool { return r.work.Err() != nil }

// finished reports whether the loop is done, and its result.
func (r *run) finished() (bool, error) {
	if r.fatal != nil {
		return r.running == 0 && !r.busy, r.fatal
	}
	cpPending := r.opts.Checkpoint != nil && r.tr.mark != r.saved
	quiet := r.slots == 0 && !r.busy && len(r.queue) == 0 && r.gone == nil && !cpPending
	if r.stopping {
		return quiet, r.stopErr
	}
	if r.srcClosed && r.peek == nil && r.retry.Len() == 0 && quiet {
		return true, nil
	}
	return false, nil
}

// checkpointDue returns the cursor to save now, or "".
func (r *run) checkpointDue(now time.Time) string {
	if r.opts.Checkpoint == nil || r.tr.mark == "" || r.tr.mark == r.saved {
		return ""
	}
	if r.stopping || r.srcClosed || now.Sub(r.lastSave) >= r.opts.CheckpointInterval {
		return r.tr.mark
	}
	return ""
}

// nextWake returns how long the loop may sleep when nothing else happens.
func (r *run) nextWake(now time.Time) time.Duration {
	wake := now.Add(time.Hour)
	if r.stopping && !r.abandoned() {
		wake = r.graceEnd
	}
	if !r.stopping && r.retry.Len() > 0 && r.slots < r.opts.Concurrency {
		wake = earlier(wake, later(r.retry.ds[0].due, r.pausedUntil)) // not before a pause ends
	}
	if !r.stopping && r.pausedUntil.After(now) {
		wake = earlier(wake, r.pausedUntil)
	}
	if r.opts.Checkpoint != nil && r.fatal == nil && r.tr.mark != r.saved && !r.busy {
		wake = earlier(wake, r.lastSave.Add(r.opts.CheckpointInterval))
	}
	return max(wake.Sub(now), 0)
}

func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// receive takes in an event read from the log.
func (r *run) receive(ev Event) {
	if ev.Data == nil || r.skip[ev.Cursor] {
		delete(r.skip, ev.Cursor)
		r.tr.add(ev.position(), true)
		return
	}
	d := newDelivery(ev.Cursor, ev.Data)
	d.seq, d.tracked = r.tr.add(ev.position(), false), true
	r.peek = d
}

// dispatch starts deliveries while slots are free.
func (r *run) dispatch(now time.Time) {
	for r.slots < r.opts.Concurrency && !now.Before(r.pausedUntil) {
		d := r.pick(now)
		if d == nil {
			return
		}
		r.start(d)
	}
}

// pick chooses what to send next: a due retry or a new event, in turn when both wait.
func (r *run) pick(now time.Time) *delivery {
	retryDue := r.retry.Len() > 0 && !r.retry.ds[0].due.After(now)
	if r.opts.Ordered {
		// One at a time, and nothing new while an older event waits for a retry.
		switch {
		case r.slots > 0:
			return nil
		case r.retry.Len() > 0:
			if retryDue {
				return heap.Pop(&r.retry).(*delivery)
			}
			return nil
		}
	}
	fresh := r.peek != nil
	if retryDue && (!fresh || r.freshLast) {
		r.freshLast = false
		return heap.Pop(&r.retry).(*delivery)
	}
	if fresh {
		d := r.peek
		r.peek, r.freshLast = nil, true
		return d
	}
	return nil
}

func (r *run) start(d *delivery) {
	r.slots++
	r.running++
	d.attempts++
	go func() {
		r.results <- workResult{d, r.f.sender.attempt(r.work, d.id, d.event)}
	}()
}

// settle decides what an attempt means and queues its outcome to be made durable.
func (r *run) settle(wr workResult, now time.Time) {
	r.running--
	d, res := wr.d, wr.res
	o := &outcome{d: d, res: res}
	if res.Status != 0 {
		r.answered = true
	}
	if res.Verdict == deliver.Failed && res.Status == 0 && !r.answered && peer.Classify(res.Err) != peer.Transient {
		// Never answered, and not reachable at all: stop, leaving the event as it was.
		d.attempts--
		r.slots--
		if _, gone := r.stopErr.(*GoneError); !gone {
			ue := &UnreachableError{Target: r.f.sender.where(), Err: res.Err}
			r.stop(ue, true)
			r.stopErr = ue
		}
		return
	}
	switch res.Verdict {
	case deliver.Abandoned:
		d.attempts--
		r.slots--
		return // still to be delivered: unsettled, or still in the store
	case deliver.Gone:
		r.slots--
		if !r.wentGone {
			r.wentGone = true
			g := GoneRecord{Target: r.f.sender.where(), Time: now.UTC(), ID: d.id, Cursor: d.cursor, Reason: res.Reason}
			ge := &GoneError{Record: g}
			if st := r.opts.State; st != nil {
				r.gone, ge.Path = &g, st.GonePath()
			}
			r.stop(ge, true)
			r.stopErr = ge // it outranks any other reason to stop
			r.report(Result{Outcome: OutcomeGone, Cursor: d.cursor, ID: d.id, Source: d.source, Type: d.typ,
				Status: res.Status, Latency: res.Latency, Attempt: d.attempts, Reason: res.Reason, Redirects: res.Redirects})
		}
		return
	case deliver.Delivered:
		o.outcome = OutcomeDelivered
		o.rec = &record{Op: opDone, Cursor: d.cursor}
	case deliver.Retry:
		if res.Status == 429 && res.HasRetryAfter {
			// A rate limit is the receiver's, not the event's: pause every delivery.
			r.pausedUntil = later(r.pausedUntil, now.Add(res.RetryAfter))
		}
		if d.attempts < r.f.policy.Attempts() {
			o.outcome = OutcomeRetry
			o.tier = min(d.tier+1, len(r.opts.Delays))
			wait := r.f.policy.Wait(o.tier, res)
			o.due, o.wait = now.Add(wait), wait
			o.rec = &record{Op: opRetry, Cursor: d.cursor, Tier: o.tier, Attempts: d.attempts, Due: o.due.UTC(),
				Status: res.Status, Reason: truncate(res.Reason, maxReasonLen)}
			if !d.stored {
				o.rec.Event = d.event
			}
			break
		}
		o.outcome = OutcomeDeadLetter
	default: // deliver.Failed
		o.outcome = OutcomeDeadLetter
	}
	if o.outcome == OutcomeDeadLetter {
		o.rec = &record{Op: opDone, Cursor: d.cursor}
		reason := res.Reason
		if res.Verdict == deliver.Retry {
			reason = fmt.Sprintf("gave up after %s; the last: %s", english.Plural(d.attempts, "attempt"), res.Reason)
		}
		dl := DeadLetter{Time: now.UTC(), Target: r.f.sender.where(), Cursor: d.cursor, ID: d.id, Source: d.source, Type: d.typ,
			Status: res.Status, Reason: reason, Attempts: d.attempts}
		if json.Valid(d.event) {
			dl.Event = d.event
		}
		b, err := json.Marshal(dl)
		if err != nil { // cannot happen with a valid event; keep the line without it
			dl.Event = nil
			b, _ = json.Marshal(dl)
		}
		o.dead = append(b, '\n')
	}
	r.queue = append(r.queue, o)
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

// acked applies what the persister made durable.
func (r *run) acked(ack persistAck) error {
	if ack.err != nil {
		return ack.err
	}
	for _, o := range ack.req.items {
		d := o.d
		if d.tracked {
			r.tr.settle(d.seq)
			d.tracked = false
		}
		r.slots--
		res := Result{Outcome: o.outcome, Cursor: d.cursor, ID: d.id, Source: d.source, Type: d.typ,
			Status: o.res.Status, Latency: o.res.Latency, Attempt: d.attempts, Reason: o.res.Reason, Redirects: o.res.Redirects}
		if o.outcome == OutcomeRetry {
			d.tier, d.due, d.stored = o.tier, o.due, true
			res.Tier, res.NextAttempt, res.RetryIn = o.tier, o.due, o.wait
			heap.Push(&r.retry, d)
		}
		r.report(res)
	}
	if ack.req.checkpoint != "" {
		r.saved, r.lastSave = ack.req.checkpoint, time.Now()
	}
	return nil
}

func (r *run) report(res Result) {
	if r.opts.OnResult == nil {
		return
	}
	if err := r.opts.OnResult(res); err != nil && !r.stopping {
		r.stop(err, true)
	}
}

// persister makes outcomes durable, one request at a time: the dead-letter lines, then the
// journal records, then a 410 record, then the checkpoint. Outcomes that pile up while it
// works go in the next request together (group commit).
func (f *Forwarder) persister(reqs <-chan persistReq, acks chan<- persistAck, dl *deadLetters) {
	for req := range reqs {
		acks <- persistAck{req: req, err: f.persist(req, dl)}
	}
}

func (f *Forwarder) persist(req persistReq, dl *deadLetters) error {
	st := f.opts.State
	var dead []byte
	var recs []*record
	for _, o := range req.items {
		dead = append(dead, o.dead...)
		if o.rec != nil {
			recs = append(recs, o.rec)
		}
	}
	if len(dead) > 0 && dl != nil {
		if err := dl.write(dead); err != nil {
			return err
		}
	}
	if st != nil && len(recs) > 0 {
		if err := st.append(recs, f.opts.Sync == SyncAlways); err != nil {
			return err
		}
	}
	if st != nil && (req.gone != nil || req.checkpoint != "") {
		if err := st.sync(); err != nil {
			return err
		}
	}
	if st != nil && req.gone != nil {
		if err := st.setGone(req.gone); err != nil {
			return err
		}
	}
	if req.checkpoint != "" && f.opts.Checkpoint != nil {
		if err := f.opts.Checkpoint(req.checkpoint); err != nil {
			return err
		}
		if st != nil {
			if err := st.checkpointed(req.checkpoint); err != nil {
				return err
			}
		}
	}
	return nil
}

// tracker follows the events read, in order, and keeps the watermark: the position up to
// which every event is settled.
type tracker struct {
	first uint64 // the seq of items[0]
	items []trackItem
	mark  string
}

type trackItem struct {
	pos     string
	settled bool
}

func (t *tracker) add(pos string, settled bool) uint64 {
	seq := t.first + uint64(len(t.items))
	t.items = append(t.items, trackItem{pos, settled})
	t.advance()
	return seq
}

func (t *tracker) settle(seq uint64) {
	t.items[seq-t.first].settled = true
	t.advance()
}

func (t *tracker) advance() {
	i := 0
	for i < len(t.items) && t.items[i].settled {
		t.mark = t.items[i].pos
		i++
	}
	if i > 0 {
		clear(t.items[:i])
		t.items = t.items[i:]
		t.first += uint64(i)
	}
}

func (t *tracker) len() int { return len(t.items) }

// retryHeap orders the events waiting for a retry by when they are due, then in log order.
type retryHeap struct {
	ds    []*delivery
	order func(a, b string) int
}

func (h *retryHeap) Len() int { return len(h.ds) }
func (h *retryHeap) Less(i, j int) bool {
	if !h.ds[i].due.Equal(h.ds[j].due) {
		return h.ds[i].due.Before(h.ds[j].due)
	}
	return h.order(h.ds[i].cursor, h.ds[j].cursor) < 0
}
func (h *retryHeap) Swap(i, j int) { h.ds[i], h.ds[j] = h.ds[j], h.ds[i] }
func (h *retryHeap) Push(x any)    { h.ds = append(h.ds, x.(*delivery)) }
func (h *retryHeap) Pop() any {
	d := h.ds[len(h.ds)-1]
	h.ds[len(h.ds)-1] = nil
	h.ds = h.ds[:len(h.ds)-1]
	return d
}
