package parker

import (
	"container/heap"
	"time"
)

// tickWidth is the resolution of deadlines: a wait runs out at most this much late.
const tickWidth = int64(5 * time.Millisecond)

// deadlines keeps connections in buckets by the tick their deadline falls in, with one timer
// set for the earliest bucket: a timer wheel that sleeps while no deadline comes.
type deadlines struct {
	epoch   time.Time // ticks count from here, on the monotonic clock
	buckets map[int64]*bucket
	ticks   tickHeap // the buckets' ticks
	timer   *time.Timer
	armed   int64 // the tick the timer is set for, when set
	set     bool
}

type bucket struct{ head *conn }

func (d *deadlines) init() {
	d.epoch = time.Now()
	d.buckets = make(map[int64]*bucket)
	d.timer = time.NewTimer(time.Hour)
	d.timer.Stop()
}

// add puts pc in the bucket of the first tick at or after at.
func (d *deadlines) add(pc *conn, at time.Time) {
	t := (int64(at.Sub(d.epoch)) + tickWidth - 1) / tickWidth
	b := d.buckets[t]
	if b == nil {
		b = &bucket{}
		d.buckets[t] = b
		heap.Push(&d.ticks, t)
		if !d.set || t < d.armed {
			d.arm(t)
		}
	}
	pc.bk, pc.bprev, pc.bnext = b, nil, b.head
	if b.head != nil {
		b.head.bprev = pc
	}
	b.head = pc
}

func (d *deadlines) arm(t int64) {
	d.armed, d.set = t, true
	d.timer.Reset(time.Until(d.epoch.Add(time.Duration(t * tickWidth))))
}

func (d *deadlines) remove(pc *conn) {
	b := pc.bk
	if b == nil {
		return
	}
	if pc.bprev != nil {
		pc.bprev.bnext = pc.bnext
	} else {
		b.head = pc.bnext
	}
	if pc.bnext != nil {
		pc.bnext.bprev = pc.bprev
	}
	pc.bk, pc.bprev, pc.bnext = nil, nil, nil
}

// due takes out the connections whose deadlines have passed, and sets the timer for the
// next.
func (d *deadlines) due(now time.Time) []*conn {
	var out []*conn
	nt := int64(now.Sub(d.epoch)) / tickWidth
	for len(d.ticks) > 0 && d.ticks[0] <= nt {
		t := heap.Pop(&d.ticks).(int64)
		b := d.buckets[t]
		delete(d.buckets, t)
		for pc := b.head; pc != nil; {
			next := pc.bnext
			pc.bk, pc.bprev, pc.bnext = nil, nil, nil
			out = append(out, pc)
			pc = next
		}
	}
	d.set = false
	if len(d.ticks) > 0 {
		d.arm(d.ticks[0])
	}
	return out
}

// tickHeap is a min-heap of ticks (container/heap).
type tickHeap []int64

func (h tickHeap) Len() int           { return len(h) }
func (h tickHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h tickHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *tickHeap) Push(x any)        { *h = append(*h, x.(int64)) }
func (h *tickHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	*h = old[:len(old)-1]
	return t
}
