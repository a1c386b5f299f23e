// Package testwait bounds a test's wait for something that should happen by the test run's own
// deadline (go test -timeout), not by a guess at how long a busy machine takes: the test waits
// as long as the run allows and then fails, naming what did not happen, a little before the
// run would be stopped. How fast something happens is for benchmarks to measure.
package testwait

import (
	"context"
	"testing"
	"time"
)

// margin is how long before the run's deadline a wait gives up, leaving time to report.
const margin = 5 * time.Second

// Deadline returns when t stops waiting. ok is false when there is no deadline: the run has
// none (-timeout 0), t is not a test (a benchmark), or t runs in a synctest bubble, where a
// wait that never ends leaves every goroutine blocked, which synctest reports at once.
func Deadline(t testing.TB) (deadline time.Time, ok bool) {
	d, ok := t.(interface{ Deadline() (time.Time, bool) })
	if !ok {
		return time.Time{}, false
	}
	defer func() {
		if recover() != nil { // called in a bubble
			deadline, ok = time.Time{}, false
		}
	}()
	deadline, ok = d.Deadline()
	if !ok {
		return time.Time{}, false
	}
	return deadline.Add(-margin), true
}

// Context returns parent, ending at t's Deadline too.
func Context(t testing.TB, parent context.Context) (context.Context, context.CancelFunc) {
	if d, ok := Deadline(t); ok {
		return context.WithDeadline(parent, d)
	}
	return context.WithCancel(parent)
}

// Expired returns a channel that receives at t's Deadline, for a select; without a deadline,
// nil, which never does.
func Expired(t testing.TB) <-chan time.Time {
	d, ok := Deadline(t)
	if !ok {
		return nil
	}
	return time.After(time.Until(d))
}

// Until checks cond every millisecond until it holds, and fails t at its Deadline saying that
// what did not come about.
func Until(t testing.TB, what string, cond func() bool) {
	t.Helper()
	d, bounded := Deadline(t)
	for !cond() {
		if bounded && time.Now().After(d) {
			t.Fatalf("%s: not by the end of the test's time", what)
		}
		time.Sleep(time.Millisecond)
	}
}
