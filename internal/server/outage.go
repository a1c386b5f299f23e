package server

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// outageSummary is how often the node's log sums up a run of failures while it lasts.
const outageSummary = 10 * time.Second

// outage sums up a run of failures of one kind (appends refused for a full disk, reads of a
// log out of reach) in the node's log: a line when the first comes, a summary every
// outageSummary while they go on, and a line when the operation succeeds again. A node
// that refuses thousands of requests a second logs a few lines, not a line per request.
type outage struct {
	what   string     // what fails, as the lines say it: "appends to the event log are refused"
	still  string     // what a summary says: "appends to the event log are still refused"
	again  string     // what the last line says: "appends to the event log are taken again"
	count  string     // the name of the count of failures in the lines: "refused", "failed"
	level  slog.Level // of the first line and the summaries
	active atomic.Bool

	mu        sync.Mutex
	since     time.Time // the first failure
	lastLine  time.Time // the last line logged
	total     int64     // failures since the first
	sinceLine int64     // failures since the last line
}

// fail notes a failure, and logs it when it is the first of a run or a summary is due.
func (o *outage) fail(log *slog.Logger, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := time.Now()
	o.total++
	o.sinceLine++
	if !o.active.Load() {
		o.active.Store(true)
		o.since, o.lastLine, o.total, o.sinceLine = now, now, 1, 0
		log.Log(context.Background(), o.level, o.what, "err", err)
		return
	}
	if d := now.Sub(o.lastLine); d >= outageSummary {
		log.Log(context.Background(), o.level, o.still, o.count, o.sinceLine, "in", d.Round(time.Second),
			"for", now.Sub(o.since).Round(time.Second), "err", err)
		o.lastLine, o.sinceLine = now, 0
	}
}

// ok notes a success: it ends a run of failures, if there is one, with a line.
func (o *outage) ok(log *slog.Logger) {
	if !o.active.Load() {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.active.Load() {
		return
	}
	o.active.Store(false)
	log.Info(o.again, o.count, o.total, "for", time.Since(o.since).Round(time.Second))
}
