package parker

import "testing"

// The workers' queue takes any number of wakes and expiries, reads up to MaxQueuedReads
// connections (returning the others), gives tasks back first in first out, and once
// closed gives back what it holds, then nothing.
func TestTaskQueue(t *testing.T) {
	var q taskQueue
	q.init()
	conns := make([]*conn, MaxQueuedReads+10)
	for i := range conns {
		conns[i] = &conn{slot: uint32(i)}
	}
	q.put(taskWake, conns[:taskSize+1]) // two tasks
	if rest := q.putReads(conns[:MaxQueuedReads-1]); len(rest) != 0 {
		t.Fatalf("%d reads not queued of %d", len(rest), MaxQueuedReads-1)
	}
	rest := q.putReads(conns[MaxQueuedReads-1:])
	if len(rest) != 10 || rest[0] != conns[MaxQueuedReads] || q.queuedReads() != MaxQueuedReads {
		t.Fatalf("past the bound: %d returned, %d queued", len(rest), q.queuedReads())
	}
	q.put(taskExpire, conns[:3])
	want := []struct {
		kind taskKind
		n    int
	}{{taskWake, taskSize}, {taskWake, 1}}
	for _, w := range want {
		tk, ok := q.take()
		if !ok || tk.kind != w.kind || len(tk.pcs) != w.n {
			t.Fatalf("took %v %d %d, want %d %d", ok, tk.kind, len(tk.pcs), w.kind, w.n)
		}
	}
	for i := range MaxQueuedReads {
		tk, ok := q.take()
		if !ok || tk.kind != taskRead || len(tk.pcs) != 1 || tk.pcs[0] != conns[i] {
			t.Fatalf("read %d: %v %d %v", i, ok, tk.kind, tk.pcs)
		}
	}
	if q.queuedReads() != 0 {
		t.Fatalf("%d reads queued after all were taken", q.queuedReads())
	}
	q.close()
	if tk, ok := q.take(); !ok || tk.kind != taskExpire || len(tk.pcs) != 3 {
		t.Fatalf("after close: %v %d %d, want the expiry queued before", ok, tk.kind, len(tk.pcs))
	}
	if _, ok := q.take(); ok {
		t.Fatal("a task from a closed, empty queue")
	}
}

// The woken calls go to the workers in the slice they were taken in, without a copy per
// task: handing a wake to the workers allocates nothing once the queue has grown.
func TestTaskQueuePutAllocates(t *testing.T) {
	var q taskQueue
	q.init()
	conns := make([]*conn, 4*taskSize)
	for i := range conns {
		conns[i] = &conn{slot: uint32(i)}
	}
	cycle := func() {
		q.put(taskWake, conns)
		for range 4 {
			if tk, ok := q.take(); !ok || len(tk.pcs) != taskSize {
				t.Fatalf("took %v %d", ok, len(tk.pcs))
			}
		}
	}
	cycle() // the queue grows to hold four tasks
	if n := testing.AllocsPerRun(100, cycle); n != 0 {
		t.Fatalf("a wake of %d calls allocated %.0f times", len(conns), n)
	}
}

// The event loop tells whether replies wait for the workers (a wake or an expiry queued),
// as against requests that read the log, for which it need not give way.
func TestTaskQueueRepliesWaiting(t *testing.T) {
	var q taskQueue
	q.init()
	conns := []*conn{{slot: 0}, {slot: 1}, {slot: 2}}
	if q.repliesWaiting() {
		t.Fatal("replies waiting in an empty queue")
	}
	q.putReads(conns[:1])
	if q.repliesWaiting() {
		t.Fatal("replies waiting with only a read queued")
	}
	q.put(taskWake, conns[1:2])
	q.put(taskExpire, conns[2:])
	for _, want := range []bool{true, true, false} { // after the read, the wake, the expiry
		tk, ok := q.take()
		if !ok {
			t.Fatal("nothing to take")
		}
		if got := q.repliesWaiting(); got != want {
			t.Fatalf("after taking a task of kind %d: replies waiting %v, want %v", tk.kind, got, want)
		}
	}
}
