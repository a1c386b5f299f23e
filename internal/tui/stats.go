package tui

import (
	"sync"
	"time"
)

// rateMeter counts events per second over the last five seconds, by the injected clock.
type rateMeter struct {
	start  time.Time
	secs   [8]int64 // the Unix second each bucket counts
	counts [8]int
}

func (r *rateMeter) add(now time.Time, n int) {
	if r.start.IsZero() {
		r.start = now
	}
	s := now.Unix()
	i := s & 7
	if r.secs[i] != s {
		r.secs[i], r.counts[i] = s, 0
	}
	r.counts[i] += n
}

// rate is the events per second over the current second and the four before it (or
// since the first event, when that is more recent).
func (r *rateMeter) rate(now time.Time) float64 {
	if r.start.IsZero() {
		return 0
	}
	s := now.Unix()
	sum := 0
	for i := range r.secs {
		if r.secs[i] >= s-4 && r.secs[i] <= s {
			sum += r.counts[i]
		}
	}
	from := time.Unix(s-4, 0)
	if r.start.After(from) {
		from = r.start
	}
	return float64(sum) / max(now.Sub(from).Seconds(), 1)
}

// tracker runs the UI's background work and lets Close wait for it: work asked for after
// Close does not start.
type tracker struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// start registers one piece of work; false means the UI is closing and it must not run.
func (t *tracker) start() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.wg.Add(1)
	return true
}

func (t *tracker) finish() { t.wg.Done() }

// close refuses new work and waits for the work running to end.
func (t *tracker) close() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.wg.Wait()
}
