package main

import (
	"testing"
	"testing/synctest"
	"time"
)

// --idle-timeout's timer fires once no event has come for its duration: each event starts
// the duration again. On a fake clock, exactly.
func TestIdleTimer(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		fired := make(chan time.Duration, 1)
		it := newIdleTimer(300*time.Millisecond, func() { fired <- time.Since(start) })
		defer it.stop()
		time.Sleep(200 * time.Millisecond)
		it.reset() // an event at 200ms
		time.Sleep(250 * time.Millisecond)
		it.reset() // and at 450ms
		if d := <-fired; d != 750*time.Millisecond {
			t.Fatalf("fired at %v, want 300ms after the last event, at 750ms", d)
		}
		// Without a duration there is no timer.
		never := newIdleTimer(0, func() { t.Error("a timer of 0 fired") })
		never.reset()
		time.Sleep(time.Hour)
		never.stop()
	})
}
