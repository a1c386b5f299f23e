package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/evtctl/evtctl/internal/deliver"
	"github.com/evtctl/evtctl/internal/english"
	"github.com/evtctl/evtctl/internal/outbox"
)

// spoolChunk is about how many events one spool entry holds: whole requests (one event each,
// or a batch), so that a batch is never split. Entries are written and removed with an
// fsync each; a crash resends at most the delivered events of the entries in flight.
const spoolChunk = 100

// runSpooled is emit with --spool DIR or --flush DIR. With --spool, every event of the run is
// written to the spool before any is sent; then the spool is drained, oldest entry first
// (events an earlier run left go first). Events the receiver refused for themselves (400,
// 413, 422) go to the spool's dead-letter file; a failure that would refuse any event alike
// (the receiver is down, 401, 404, 410, ...) stops the sending, and what was not delivered
// waits in the spool. The last message says how many events were delivered and how many
// wait, and the exit status is 1 when any wait or were refused.
func (e *emitter) runSpooled(ctx context.Context) error {
	opts := e.opts
	dir := firstNonEmpty(opts.Spool, opts.Flush)
	spool, err := outbox.Open(dir)
	if err != nil {
		return err
	}
	defer spool.Close()
	errOut := opts.streams.ErrOut

	earlier, damaged, err := e.spoolEvents(spool)
	if err != nil {
		return err
	}
	var readErr error
	if opts.Spool != "" {
		if earlier > 0 {
			fmt.Fprintf(errOut, "evtctl: the spool %s holds %s from an earlier run; they go first\n", dir, english.Plural(earlier, "event"))
		}
		var n int
		n, readErr = e.spoolAll(ctx, spool)
		var se *strictError
		if errors.As(readErr, &se) {
			return readErr // nothing of this run was kept, and nothing is sent
		}
		e.prog.total = earlier + n
	} else {
		e.prog.total = earlier
	}

	d := e.drain(ctx, spool)
	d.damaged += damaged
	e.prog.done()
	waiting, damaged, err := e.spoolEvents(spool)
	if err != nil {
		return err
	}
	d.damaged += damaged
	var hints []string // what to do about the failure, after the summary
	if d.failure != nil && !closedPipe(d.failure) && ctx.Err() == nil {
		var failure error
		hints, failure = splitHints(e.deliveryError(d.failure))
		fmt.Fprintf(errOut, "evtctl: %s\n", safeText(failure.Error()))
	}
	if waiting == 0 && d.refused == 0 && d.damaged == 0 && readErr == nil && d.failure == nil {
		sent, dups, _ := e.acks.Counts()
		e.opts.summary(e.prog, sent, dups, e.start)
		return nil
	}
	msg := "delivered " + english.Plural(e.delivered(), "event")
	if d.refused > 0 {
		msg += fmt.Sprintf("; %s refused by the receiver, kept in %s (to resend: jq -c .event %s | evtctl emit --file -)",
			english.WasWere(d.refused, "event"), spool.DeadLetterPath(), spool.DeadLetterPath())
	}
	if d.damaged > 0 {
		msg += fmt.Sprintf("; %s damaged and moved aside (*.bad in %s)", english.WasWere(d.damaged, "spool entry"), dir)
	}
	if waiting > 0 {
		flush := "evtctl emit --flush " + dir
		if opts.To != "" {
			flush += " --to " + opts.To
		}
		verb := "wait"
		if waiting == 1 {
			verb = "waits"
		}
		msg += fmt.Sprintf("; %s %s in the spool %s (%s to send them)", english.Plural(waiting, "event"), verb, dir, flush)
	}
	switch {
	case ctx.Err() != nil:
		fmt.Fprintf(errOut, "evtctl: interrupted: %s\n", msg)
		return ctx.Err()
	case readErr != nil:
		fmt.Fprintf(errOut, "evtctl: %s\n", msg)
		return readErr
	}
	return withHints(&statusError{exitError, errors.New(msg)}, hints...)
}

// strictError is an event that does not pass lint with --strict.
type strictError struct {
	n       int  // the event's number
	spooled bool // found while spooling: nothing at all was sent
}

func (e *strictError) Error() string {
	if e.spooled {
		return fmt.Sprintf("event %d does not pass lint (--strict); nothing was sent", e.n)
	}
	return fmt.Sprintf("event %d does not pass lint (--strict); nothing more is sent", e.n)
}

// spoolAll reads every event of the run and writes it durably to the spool before any is
// sent, in entries of whole requests. A bad event stops the reading: the events before it
// stay in the spool (in batch mode, except those of the batch it is in), and the error is
// returned. With --strict, an event that does not pass lint removes this run's entries:
// nothing of it is sent.
func (e *emitter) spoolAll(ctx context.Context, spool *outbox.Spool) (int, error) {
	next, err := e.opts.source(ctx)
	if err != nil {
		return 0, err
	}
	group := e.opts.group()
	per := max(1, spoolChunk/group) * group
	var (
		entry [][]byte
		put   []outbox.Entry
		n     int
	)
	store := func() error {
		if len(entry) == 0 {
			return nil
		}
		en, err := spool.Put(entry)
		if err != nil {
			return err
		}
		put, n, entry = append(put, en), n+len(entry), nil
		return nil
	}
	for {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		b, _, err := next()
		if err == io.EOF {
			return n, store()
		}
		if err != nil {
			var se *strictError
			if errors.As(err, &se) {
				for _, en := range put {
					if derr := spool.Done(en); derr != nil {
						return n, errors.Join(err, derr)
					}
				}
				return 0, &strictError{n: se.n, spooled: true}
			}
			entry = entry[:len(entry)-len(entry)%group] // the batch holding the bad event is not sent
			if serr := store(); serr != nil {
				return n, errors.Join(err, serr)
			}
			return n, err
		}
		entry = append(entry, b)
		if len(entry) == per {
			if err := store(); err != nil {
				return n, err
			}
		}
	}
}

// spoolEvents counts the events in the spool, and the entries that failed their checks,
// which it reports: the spool has moved them aside.
func (e *emitter) spoolEvents(spool *outbox.Spool) (events, damaged int, err error) {
	es, err := spool.Pending()
	if err != nil {
		return 0, 0, err
	}
	for _, en := range es {
		evs, err := en.Events()
		if errors.Is(err, outbox.ErrCorrupt) {
			e.warnDamaged(err)
			damaged++
			continue
		}
		if err != nil {
			return 0, 0, err
		}
		events += len(evs)
	}
	return events, damaged, nil
}

// warnDamaged reports a spool entry that failed its checks.
func (e *emitter) warnDamaged(err error) {
	fmt.Fprintf(e.opts.streams.ErrOut, "evtctl: warning: %s\n", safeText(err.Error()))
}

// drainResult is what became of a drain.
type drainResult struct {
	refused int   // events moved to the dead-letter file
	damaged int   // entries that failed their checks, moved aside
	failure error // what stopped the sending, if anything did
}

// spoolEntry is an entry being drained: its events, sent in groups of one request each.
type spoolEntry struct {
	e      outbox.Entry
	events [][]byte
	groups int
	// Guarded by drainer.mu.
	settled []bool // the group was delivered or dead-lettered
	done    int    // groups with an outcome (settled or failed)
	failed  bool
	removed bool
}

type drainJob struct {
	se     *spoolEntry
	gi     int // group index
	lo, hi int
}

// drainer is the state of one drain.
type drainer struct {
	e     *emitter
	spool *outbox.Spool
	stop  context.CancelCauseFunc

	mu      sync.Mutex
	res     drainResult
	touched []*spoolEntry
}

// drain sends the spool's entries, oldest first, with --concurrency requests in flight, and
// takes out of the spool what was delivered or dead-lettered. It stops at the first failure
// that is not the events' own.
func (e *emitter) drain(ctx context.Context, spool *outbox.Spool) drainResult {
	es, err := spool.Pending()
	if err != nil {
		return drainResult{failure: err}
	}
	dctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	d := &drainer{e: e, spool: spool, stop: stop}
	group, lim := e.opts.group(), e.opts.limiter()
	jobs := make(chan drainJob)
	var wg sync.WaitGroup
	for range e.opts.Concurrency {
		wg.Go(func() {
			for j := range jobs {
				d.send(ctx, j)
			}
		})
	}
dispatch:
	for _, en := range es {
		if dctx.Err() != nil {
			break
		}
		events, err := en.Events()
		if errors.Is(err, outbox.ErrCorrupt) {
			e.warnDamaged(err)
			d.mu.Lock()
			d.res.damaged++
			d.mu.Unlock()
			continue
		}
		if err != nil {
			d.fail(err)
			break
		}
		se := &spoolEntry{e: en, events: events, groups: (len(events) + group - 1) / group}
		se.settled = make([]bool, se.groups)
		d.mu.Lock()
		d.touched = append(d.touched, se)
		d.mu.Unlock()
		for gi := range se.groups {
			lo, hi := gi*group, min((gi+1)*group, len(events))
			if lim != nil && lim.WaitN(dctx, hi-lo) != nil {
				break dispatch
			}
			select {
			case jobs <- drainJob{se: se, gi: gi, lo: lo, hi: hi}:
			case <-dctx.Done():
				break dispatch
			}
		}
	}
	close(jobs)
	wg.Wait()
	d.finish()
	return d.res
}

// send delivers one group and records its outcome.
func (d *drainer) send(ctx context.Context, j drainJob) {
	events := j.se.events[j.lo:j.hi]
	res, err := d.e.s.Send(ctx, events)
	if err == nil {
		if rerr := d.e.report(events, res); rerr != nil {
			d.fail(rerr) // the events were delivered all the same
		}
		d.settle(j, true)
		return
	}
	if se, ok := refusedEvents(err); ok {
		now := time.Now().UTC()
		dls := make([]outbox.DeadLetter, len(events))
		for i, ev := range events {
			dls[i] = outbox.DeadLetter{Time: now, Target: d.e.s.Where(), ID: eventID(ev), Status: se.Status, Reason: se.Reason, Event: ev}
		}
		if derr := d.spool.AddDeadLetters(dls); derr != nil {
			d.fail(derr)
			d.settle(j, false)
			return
		}
		fmt.Fprintf(d.e.opts.streams.ErrOut, "evtctl: the receiver refused %s (%d: %s); kept in %s\n",
			describeEvents(events), se.Status, safeText(se.Reason), d.spool.DeadLetterPath())
		d.mu.Lock()
		d.res.refused += len(events)
		d.mu.Unlock()
		d.settle(j, true)
		return
	}
	d.fail(err)
	d.settle(j, false)
}

// describeEvents names a group of events in a message.
func describeEvents(events [][]byte) string {
	if len(events) == 1 {
		return "event " + safeText(eventID(events[0]))
	}
	return "a batch of " + english.Plural(len(events), "event")
}

// refusedEvents reports whether the receiver refused the events themselves, so that sending
// them again cannot succeed while other events may: 400 (a bad event), 413 (too large) and
// 422. Any other final answer (401, 403, 404, 415, a redirect not followed, 410) is about the
// request or the receiver and would refuse every event alike.
func refusedEvents(err error) (*deliver.StatusError, bool) {
	var se *deliver.StatusError
	if !errors.As(err, &se) {
		return nil, false
	}
	switch se.Status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
		return se, true
	}
	return nil, false
}

// fail records the first failure that stops the drain.
func (d *drainer) fail(err error) {
	d.mu.Lock()
	if d.res.failure == nil {
		d.res.failure = err
	}
	d.mu.Unlock()
	d.stop(err)
}

// settle records a group's outcome; an entry whose every group was delivered or
// dead-lettered is removed from the spool at once, so that a crash does not resend it.
func (d *drainer) settle(j drainJob, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	se := j.se
	se.done++
	se.settled[j.gi] = ok
	se.failed = se.failed || !ok
	if se.done == se.groups && !se.failed {
		if err := d.spool.Done(se.e); err != nil && d.res.failure == nil {
			d.res.failure = err
			d.stop(err)
			return
		}
		se.removed = true
	}
}

// finish rewrites the entries that were delivered in part, to hold only what is still to
// be sent.
func (d *drainer) finish() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, se := range d.touched {
		if se.removed {
			continue
		}
		var rest [][]byte
		some := false
		group := d.e.opts.group()
		for gi, ok := range se.settled {
			if ok {
				some = true
				continue
			}
			rest = append(rest, se.events[gi*group:min((gi+1)*group, len(se.events))]...)
		}
		if !some {
			continue
		}
		if err := d.spool.Rewrite(se.e, rest); err != nil && d.res.failure == nil {
			d.res.failure = err
		}
	}
}
