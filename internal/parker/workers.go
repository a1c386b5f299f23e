package parker

import (
	"bytes"
	"sync"
	"sync/atomic"
	"time"

	"github.com/evtctl/evtctl/internal/rawpoll"
)

type taskKind uint8

const (
	taskRead   taskKind = iota // input, or a hang-up, on an idle connection
	taskWake                   // the head moved: read again for these waiters
	taskExpire                 // their waits ran out, or nothing may wait any more
)

type task struct {
	kind taskKind
	pcs  []*conn
}

// taskSize is how many waiters a wake or expiry task takes: enough to make a task's cost
// small beside its work, few enough to share a wake among the workers.
const taskSize = 32

// maxQueuedReads bounds the connections whose requests wait for a worker: past it, they go
// to net/http (dispatchReads).
const maxQueuedReads = 4096

// MaxQueuedReads is how many connections' requests the workers' queue holds.
const MaxQueuedReads = maxQueuedReads

// dispatch hands connections to the workers, taskSize to a task, without waiting for them:
// the wakes and expiries of any number of connections are queued. The tasks hold pcs itself,
// which the caller leaves to them.
func (p *Parker) dispatch(kind taskKind, pcs []*conn) { p.tasks.put(kind, pcs) }

// dispatchReads hands connections whose requests read the log to the workers, a connection
// to a task, so that a read that hangs holds up no other connection's request while a
// worker is free. Once maxQueuedReads wait for a worker (every worker stuck in a read of a
// log that does not answer), it hands the others to net/http, which serves each request in
// a goroutine of its own: the caller never waits for a worker.
func (p *Parker) dispatchReads(pcs []*conn) {
	for _, pc := range p.tasks.putReads(pcs) {
		b := pc.buf
		pc.buf = nil
		p.handBack(pc, b)
	}
}

// taskQueue holds the workers' tasks, first in first out. Putting a task in never waits:
// nothing that watches connections, heads or deadlines may wait for a worker, which may be
// stuck in a read of the log. It holds no more than a task per connection the parker holds
// (a connection is in one task at a time), and reads up to maxQueuedReads.
type taskQueue struct {
	mu      sync.Mutex
	more    sync.Cond // signalled when a task is put, broadcast when closed
	tasks   []task
	head    int // tasks[head:] wait
	reads   int // connections in the read tasks waiting
	closed  bool
	replies atomic.Int32 // wake and expiry tasks waiting: changed under mu, read without it
}

func (q *taskQueue) init() { q.more.L = &q.mu }

// put queues tasks of up to taskSize of pcs (a wake or an expiry), each holding its part of
// pcs, which the caller no longer changes: a wake allocates nothing here.
func (q *taskQueue) put(kind taskKind, pcs []*conn) {
	if len(pcs) == 0 {
		return
	}
	q.mu.Lock()
	for len(pcs) > 0 {
		n := min(len(pcs), taskSize)
		q.tasks = append(q.tasks, task{kind: kind, pcs: pcs[:n:n]})
		pcs = pcs[n:]
		q.replies.Add(1)
		q.more.Signal()
	}
	q.mu.Unlock()
}

// putReads queues a read task for each of pcs while fewer than maxQueuedReads wait, and
// returns those it did not queue.
func (q *taskQueue) putReads(pcs []*conn) (rest []*conn) {
	if len(pcs) == 0 {
		return nil
	}
	q.mu.Lock()
	n := min(len(pcs), max(0, maxQueuedReads-q.reads))
	for _, pc := range pcs[:n] {
		q.tasks = append(q.tasks, task{kind: taskRead, pcs: []*conn{pc}})
		q.more.Signal()
	}
	q.reads += n
	q.mu.Unlock()
	return pcs[n:]
}

// take waits for a task and takes it; ok is false once the queue is closed and empty.
func (q *taskQueue) take() (t task, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.head == len(q.tasks) {
		if q.closed {
			return task{}, false
		}
		q.more.Wait()
	}
	t = q.tasks[q.head]
	q.tasks[q.head] = task{}
	q.head++
	if t.kind == taskRead {
		q.reads -= len(t.pcs)
	} else {
		q.replies.Add(-1)
	}
	switch {
	case q.head == len(q.tasks):
		q.tasks, q.head = q.tasks[:0], 0
	case q.head >= 1024 && q.head*2 >= len(q.tasks):
		n := copy(q.tasks, q.tasks[q.head:])
		clear(q.tasks[n:])
		q.tasks, q.head = q.tasks[:n], 0
	}
	return t, true
}

// repliesWaiting says whether wakes or expiries wait for a worker: replies to send.
func (q *taskQueue) repliesWaiting() bool { return q.replies.Load() > 0 }

// queuedReads is the number of connections whose requests wait for a worker.
func (q *taskQueue) queuedReads() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.reads
}

// close ends the workers once the tasks queued are done; nothing is put after it.
func (q *taskQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.more.Broadcast()
	q.mu.Unlock()
}

// worker serves the connections of tasks: it reads requests, answers them or parks their
// calls, and answers woken calls. Its buffers serve one connection at a time.
type worker struct {
	p      *Parker
	in     []byte
	out    []byte
	inline bool    // the event loop's: it leaves a request that would read the log to a worker
	req    Request // the request being served: in the worker, not on the heap, as Call.Serve takes it
}

// readBufSize bounds a request the parker reads: larger ones go to net/http.
const readBufSize = 4096

func (w *worker) work() {
	p := w.p
	for {
		t, ok := p.tasks.take()
		if !ok {
			return
		}
		for _, pc := range t.pcs {
			switch t.kind {
			case taskRead:
				if pc.hup.Load() {
					// Its client gave up while the request waited for a worker.
					p.close(pc)
					continue
				}
				w.serve(pc)
			case taskWake:
				w.wake(pc)
			case taskExpire:
				w.expire(pc)
			}
		}
	}
}

// served is what became of a connection a worker served.
type served int

const (
	replied    served = iota // answered: the connection is still the caller's
	released                 // parked, closed, or being written by a goroutine of its own
	notForUs                 // a request for net/http: the caller hands the connection back
	parkedCall               // its call waits
	forWorker                // the event loop's: a request that reads the log, left to a worker
)

// serve reads and answers pc's requests until it must wait for more input, parks a call,
// or hands the connection to net/http. The event loop's (inline) leaves a request that would
// read the log to a worker: true, with the request and what follows it in pc.buf, for the
// caller to hand pc to a worker.
func (w *worker) serve(pc *conn) bool {
	if w.in == nil {
		w.in = make([]byte, 0, readBufSize)
	}
	if len(pc.buf) > cap(w.in) {
		w.p.handBack(pc, pc.buf)
		return false
	}
	b := append(w.in[:0], pc.buf...)
	pc.buf = nil
	for {
		var n int
		var st parseStatus
		w.req, n, st = parseRequest(b)
		switch st {
		case parseOK:
			pc.fresh = false
			if len(b) > n {
				pc.buf = bytes.Clone(b[n:]) // pipelined: served after this one
			}
			switch w.handle(pc, &w.req) {
			case replied:
				b = append(w.in[:0], pc.buf...)
				pc.buf = nil
				continue
			case notForUs:
				pc.buf = nil
				w.p.handBack(pc, b)
			case forWorker:
				pc.buf = bytes.Clone(b)
				return true
			}
			return false
		case parseNo:
			w.p.handBack(pc, b)
			return false
		}
		if len(b) == cap(w.in) {
			w.p.handBack(pc, b)
			return false
		}
		pc.in.Store(false)
		m, err := rawpoll.Read(pc.fd, w.in[len(b):cap(w.in)])
		if m > 0 {
			b = w.in[:len(b)+m]
			continue
		}
		if !rawpoll.WouldBlock(err) || pc.hup.Load() {
			w.p.close(pc) // the client closed the connection, or it failed
			return false
		}
		if len(b) > 0 {
			// A request in pieces: net/http waits for the rest, within its timeouts.
			w.p.handBack(pc, b)
			return false
		}
		if !w.p.idle(pc) {
			return false
		}
	}
}

// handle serves one request: it answers it, parks its call, or leaves it to net/http.
func (w *worker) handle(pc *conn, req *Request) served {
	p := w.p
	if pc.call == nil {
		pc.call = p.cfg.NewCall()
	}
	req.Start = time.Now()
	closeAfter := req.Close || p.closing.Load()
	b, out := pc.call.Serve(p.ctx, req, w.inline, closeAfter, w.out[:0])
	switch out {
	case Waits:
		pc.close, pc.start = req.Close, req.Start
		p.park(pc)
		return parkedCall
	case Declined:
		return notForUs
	case Later:
		return forWorker
	}
	return w.send(pc, b, closeAfter, req.Start)
}

// wake reads again for a waiting call after its head moved: it answers, or waits on.
func (w *worker) wake(pc *conn) {
	p := w.p
	if p.closing.Load() {
		w.expire(pc)
		return
	}
	closeAfter := pc.close || p.closing.Load()
	b, out := pc.call.Wake(p.ctx, closeAfter, w.out[:0])
	if out == Waits {
		p.park(pc)
		return
	}
	w.finish(pc, b, closeAfter)
}

// expire answers a waiting call with what it has.
func (w *worker) expire(pc *conn) {
	closeAfter := pc.close || w.p.closing.Load()
	w.finish(pc, pc.call.Expire(closeAfter, w.out[:0]), closeAfter)
}

// finish writes the reply b of pc's call, then serves the connection on.
func (w *worker) finish(pc *conn, b []byte, closeAfter bool) {
	if w.send(pc, b, closeAfter, pc.start) == replied {
		w.next(pc)
	}
}

// next serves pc after a reply: a pipelined request, or input that has come, else it waits
// idle.
func (w *worker) next(pc *conn) {
	if w.p.off.Load() {
		b := pc.buf
		pc.buf = nil
		w.p.handBack(pc, b)
		return
	}
	if (len(pc.buf) > 0 || w.p.idle(pc)) && w.serve(pc) {
		w.p.dispatchReads([]*conn{pc})
	}
}
