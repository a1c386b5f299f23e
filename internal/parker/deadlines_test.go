package parker

import (
	"math/rand/v2"
	"testing"
	"time"
)

// The deadline buckets give each connection back once, never before its deadline, and at
// most a tick after it; a connection removed is never given back.
func TestDeadlines(t *testing.T) {
	var d deadlines
	d.init()
	defer d.timer.Stop()
	rng := rand.New(rand.NewPCG(1, 2))
	at := map[*conn]time.Time{}
	removed := map[*conn]bool{}
	for range 2000 {
		pc := &conn{}
		at[pc] = d.epoch.Add(time.Duration(rng.Int64N(int64(3 * time.Second))))
		d.add(pc, at[pc])
		if rng.IntN(10) == 0 {
			d.remove(pc)
			removed[pc] = true
		}
	}
	seen := map[*conn]bool{}
	for now := d.epoch; now.Before(d.epoch.Add(4 * time.Second)); now = now.Add(time.Duration(rng.Int64N(int64(7 * time.Millisecond)))) {
		for _, pc := range d.due(now) {
			switch {
			case removed[pc]:
				t.Fatalf("a connection removed was given back")
			case seen[pc]:
				t.Fatalf("a connection was given back twice")
			case now.Before(at[pc]):
				t.Fatalf("given back at %v, before its deadline %v", now.Sub(d.epoch), at[pc].Sub(d.epoch))
			case now.Sub(at[pc]) > time.Duration(tickWidth)+7*time.Millisecond:
				t.Fatalf("given back at %v, long after its deadline %v", now.Sub(d.epoch), at[pc].Sub(d.epoch))
			}
			seen[pc] = true
		}
		if d.set != (len(d.ticks) > 0) || (d.set && d.armed != d.ticks[0]) {
			t.Fatalf("the timer is set %v for %d, with %d buckets, the first %v", d.set, d.armed, len(d.ticks), d.ticks)
		}
	}
	if len(seen)+len(removed) != len(at) || len(d.buckets) != 0 {
		t.Fatalf("%d given back, %d removed, of %d; %d buckets left", len(seen), len(removed), len(at), len(d.buckets))
	}
}
