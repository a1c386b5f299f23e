package server

import (
	"bytes"
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/evtctl/evtctl/internal/rawpoll"
)

// Parked long-polls.
//
// Served by net/http, a waiting long-poll holds its connection's goroutine, the goroutine
// net/http runs beside a handler to notice a hang-up, and their buffers: about 20 kB each. A
// parked one holds a small struct: its connection, its call, its deadline. The parker, one
// per Server (on Linux; elsewhere long-polls wait as before):
//
//   - reads the connections of a listener made by Attach before net/http does, with its own
//     parser of the requests long-polling clients send (httpreq.go), and answers those
//     itself. Any other request — and a connection whose request does not come in one piece —
//     is handed to net/http with the bytes read so far, through the same listener's Accept;
//     net/http takes a connection out again (Hijack) when a long-poll it serves must wait.
//   - watches the connections it holds with epoll (edge-triggered, for input and hang-up),
//     waited on in a system call of its own rather than in Go's poller (rawpoll), so that a
//     waiting or idle connection has no goroutine, input that comes while the event loop is
//     busy wakes nothing, and a hang-up frees its slot among the waiters at once.
//   - keeps the deadlines of waits, and of idle connections, in one timer's buckets.
//   - wakes the waiters of a head of the log when it moves (one goroutine per head, not per
//     waiter); a bounded set of workers then re-reads for them (one read and one encoded
//     page per distinct question, see sharedPage) and writes each reply whole, HTTP head
//     included, with one write(2); a reply the socket cannot take at once is finished by a
//     goroutine of its own.
//   - reads the next request on a connection it has answered in the worker that wrote the
//     reply, without going back to net/http; the event loop itself reads the requests that
//     come on idle connections, and parks those it can without reading the log (a long-poll
//     that asks what another call has just found nothing for), leaving the rest to the
//     workers: it never waits on the log, so a slow read holds up no other connection.
//   - never waits for a worker, in the event loop, the timer or a head's watcher: their work
//     is queued (taskQueue), and once maxQueuedReads requests wait for a worker, the event
//     loop hands further ones to net/http.
//
// TLS connections are not parked: their requests come through crypto/tls, and net/http
// serves them as before. Neither are HTTP/1.0 requests nor the calls of a JSON-RPC batch.

// Connection states, changed under parker.mu.
const (
	connBusy   = iota // a worker, a writer or a handler holds it
	connParked        // waiting: on a wait list and a deadline
	connIdle          // between requests: on a deadline, waiting for input
)

// pconn is a connection the parker holds: its descriptor alone, out of Go's poller, so that
// its events are not read twice (by the parker and by the runtime), and it holds no more
// memory than its few links.
type pconn struct {
	fd        int
	slot, gen uint32
	via       *parkListener // where it goes back to net/http
	state     uint8
	fresh     bool        // no request yet: the header timeout applies while it is idle
	in        atomic.Bool // input since its last read
	hup       atomic.Bool // its client has closed its end
	buf       []byte      // bytes read and not yet served: a pipelined request
	call      call        // while parked
	poll      poll        // what call.pl points to for the calls it reads (handle), one after another

	wl           *waitList
	wprev, wnext *pconn
	bk           *bucket
	bprev, bnext *pconn
}

// key is what the poller's events for pc carry: its slot and generation.
func (pc *pconn) key() uint64 { return uint64(pc.slot) | uint64(pc.gen)<<32 }

// call is a long-poll being served on a parked connection.
type call struct {
	pl    *poll
	id    json.RawMessage // of a JSON-RPC call
	get   bool            // GET /events, else a JSON-RPC call
	close bool            // the client asked to close the connection after the reply
	start time.Time       // when the request came
	due   time.Time       // when its wait runs out
}

// poller watches the connections the parker holds (rawpoll.Poller).
type poller interface {
	Add(fd int, key uint64) error
	Del(fd int) error
	Wait(evs []rawpoll.Event) (int, error)
	Close() error
}

type parker struct {
	s       *Server
	poll    poller
	ctx     context.Context // of the reads made for parked calls
	cancel  context.CancelFunc
	tasks   taskQueue
	done    chan struct{} // closed to stop the event loop and the timer
	loops   sync.WaitGroup
	closing atomic.Bool // mirrors closed, for reads outside mu
	off     atomic.Bool // mirrors failed, for reads outside mu

	mu      sync.Mutex
	closed  bool
	failed  bool     // the poller failed: the parker takes no connection and holds none
	conns   []*pconn // by slot
	free    []uint32
	gen     uint32
	owned   int // connections held: adopted and not yet closed or handed back
	writing int // of those, connections whose reply a goroutine of its own is finishing
	lists   map[<-chan struct{}]*waitList
	dl      deadlines
	drained chan struct{} // closed when closed and nothing is held

	date atomic.Pointer[dateLine]

	rpcOK, getOK   prometheus.Counter
	rpcLat, getLat prometheus.Observer
}

type taskKind uint8

const (
	taskRead   taskKind = iota // input, or a hang-up, on an idle connection
	taskWake                   // the head moved: read again for these waiters
	taskExpire                 // their waits ran out, or the node is shutting down
)

type parkTask struct {
	kind taskKind
	pcs  []*pconn
}

// taskSize is how many connections a task takes: enough to make a task's cost small beside
// its work, few enough to share a wake among the workers.
const taskSize = 32

var (
	errParkerClosed = errors.New("the node is shutting down")
	errParkerOff    = errors.New("long-polls wait in the HTTP server: the connections' poller failed")
)

// newParker starts a parker for s, or returns nil where connections cannot be watched.
func newParker(s *Server) *parker {
	poll, err := rawpoll.New()
	if err != nil {
		if !errors.Is(err, errors.ErrUnsupported) {
			s.log.Warn("long-polls will wait in goroutines: cannot watch connections", "err", err)
		}
		return nil
	}
	return startParker(s, poll)
}

// startParker starts a parker for s that watches connections with poll.
func startParker(s *Server, poll poller) *parker {
	ctx, cancel := context.WithCancel(context.Background())
	p := &parker{
		s: s, poll: poll, ctx: ctx, cancel: cancel,
		done:    make(chan struct{}),
		lists:   make(map[<-chan struct{}]*waitList),
		drained: make(chan struct{}),
		rpcOK:   s.metrics.requests.WithLabelValues("rpc", "200"),
		getOK:   s.metrics.requests.WithLabelValues("events_get", "200"),
		rpcLat:  s.metrics.latency.WithLabelValues("rpc"),
		getLat:  s.metrics.latency.WithLabelValues("events_get"),
	}
	p.dl.init()
	p.tasks.init()
	workers := make([]*worker, max(2, runtime.GOMAXPROCS(0))+1) // the last one the event loop's
	for i := range workers {
		workers[i] = &worker{p: p, in: make([]byte, 0, readBufSize), out: make([]byte, 0, readBufSize)}
	}
	lw := workers[len(workers)-1]
	lw.quick = true
	p.loops.Add(2)
	go p.eventLoop(lw)
	go p.timerLoop()
	for _, w := range workers[:len(workers)-1] {
		go w.work()
	}
	return p
}

// --- holding connections ----------------------------------------------------------------------

// adopt takes c into the parker's hold, busy (its caller's), or idle and waiting for its
// first request when fresh. pending are bytes of it already read. c is closed, its socket
// kept in a descriptor of the parker's own; on an error c is as it was.
func (p *parker) adopt(c *net.TCPConn, via *parkListener, pending []byte, fresh bool) (*pconn, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var fd int
	var derr error
	if err := rc.Control(func(f uintptr) { fd, derr = rawpoll.Dup(int(f)) }); err != nil || derr != nil {
		return nil, errors.Join(err, derr)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.failed {
		_ = rawpoll.Close(fd)
		if p.failed {
			return nil, errParkerOff
		}
		return nil, errParkerClosed
	}
	var slot uint32
	if n := len(p.free); n > 0 {
		slot, p.free = p.free[n-1], p.free[:n-1]
	} else {
		slot = uint32(len(p.conns))
		p.conns = append(p.conns, nil)
	}
	p.gen++
	pc := &pconn{fd: fd, slot: slot, gen: p.gen, via: via, buf: pending, fresh: fresh}
	if fresh {
		p.idleLocked(pc)
	}
	// Added under mu, so that shutdown cannot close the connection in between.
	if err := p.poll.Add(fd, pc.key()); err != nil {
		p.dl.remove(pc)
		p.free = append(p.free, slot)
		_ = rawpoll.Close(fd)
		return nil, err
	}
	_ = c.Close() // the socket stays open: fd holds it
	p.conns[slot] = pc
	p.owned++
	return pc, nil
}

// netConn makes fd, a connected TCP socket, a net.Conn of Go's poller again; fd is closed.
func netConn(fd int) (*net.TCPConn, error) {
	f := os.NewFile(uintptr(fd), "tcp")
	c, err := net.FileConn(f) // a duplicate of fd
	f.Close()
	if err != nil {
		return nil, err
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		c.Close()
		return nil, fmt.Errorf("not a TCP connection: %T", c)
	}
	return tc, nil
}

// idleLocked makes pc wait for its next request.
func (p *parker) idleLocked(pc *pconn) {
	pc.state = connIdle
	d := pc.via.idleTimeout
	if pc.fresh {
		d = pc.via.headerTimeout
	}
	if d > 0 {
		p.dl.add(pc, time.Now().Add(d))
	}
}

// idle lets pc wait for its next request; true when input has come already and the caller
// should read it.
func (p *parker) idle(pc *pconn) bool {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.close(pc)
		return false
	}
	if p.failed {
		p.mu.Unlock()
		p.handBack(pc, nil)
		return false
	}
	if pc.in.Load() || pc.hup.Load() {
		p.mu.Unlock()
		return true
	}
	p.idleLocked(pc)
	p.mu.Unlock()
	return false
}

// close closes a connection its caller holds.
func (p *parker) close(pc *pconn) {
	_ = rawpoll.Close(pc.fd)
	p.mu.Lock()
	p.releaseLocked(pc)
	p.mu.Unlock()
}

// handBack gives a connection its caller holds to net/http, with the bytes of it read and
// not served.
func (p *parker) handBack(pc *pconn, unread []byte) {
	p.mu.Lock()
	var err error
	if !p.failed { // else the poller is closed, and watches nothing
		err = p.poll.Del(pc.fd)
	}
	p.releaseLocked(pc)
	p.mu.Unlock()
	var c *net.TCPConn
	if err == nil {
		c, err = netConn(pc.fd)
	} else {
		_ = rawpoll.Close(pc.fd)
	}
	if err != nil {
		p.s.log.Debug("handing a connection back to net/http", "err", err)
		return
	}
	pc.via.deliver(&backConn{TCPConn: c, prefix: bytes.Clone(unread), via: pc.via})
}

func (p *parker) releaseLocked(pc *pconn) {
	if p.conns[pc.slot] != pc {
		return
	}
	p.conns[pc.slot] = nil
	p.free = append(p.free, pc.slot)
	p.owned--
	p.checkDrainedLocked()
}

// checkDrainedLocked notes, once the parker is closed, that no connection is held but by a
// writer of its own: those only write, and shutdown need not wait for a client that does not
// read.
func (p *parker) checkDrainedLocked() {
	if p.closed && p.owned == p.writing {
		select {
		case <-p.drained:
		default:
			close(p.drained)
		}
	}
}

// --- waiting --------------------------------------------------------------------------------

// waitList holds the calls waiting for the head of the log to move from where it was when
// Changed returned ch.
type waitList struct {
	ch   <-chan struct{}
	head *pconn
	gone chan struct{} // closed when the list empties before ch closes: its watcher ends
}

// park puts pc, whose call found nothing, among the waiters until the head moves, its wait
// runs out or its client hangs up.
func (p *parker) park(pc *pconn) {
	p.mu.Lock()
	if !p.closed && !p.failed && !pc.hup.Load() {
		pc.state = connParked
		ch := pc.call.pl.changed
		wl := p.lists[ch]
		if wl == nil {
			wl = &waitList{ch: ch, gone: make(chan struct{})}
			p.lists[ch] = wl
			p.loops.Add(1)
			go p.watch(wl)
		}
		pc.wl, pc.wprev, pc.wnext = wl, nil, wl.head
		if wl.head != nil {
			wl.head.wprev = pc
		}
		wl.head = pc
		p.dl.add(pc, pc.call.due)
		p.mu.Unlock()
		return
	}
	answer := p.closed || p.failed
	p.mu.Unlock()
	if answer {
		// Nothing waits any more: the call is answered with what it has.
		(&worker{p: p}).expire(pc)
	} else {
		p.hangUp(pc)
	}
}

// unparkLocked takes pc off its wait list and deadline: its caller holds it.
func (p *parker) unparkLocked(pc *pconn) {
	if wl := pc.wl; wl != nil {
		if pc.wprev != nil {
			pc.wprev.wnext = pc.wnext
		} else {
			wl.head = pc.wnext
		}
		if pc.wnext != nil {
			pc.wnext.wprev = pc.wprev
		}
		pc.wl, pc.wprev, pc.wnext = nil, nil, nil
		if wl.head == nil && p.lists[wl.ch] == wl {
			delete(p.lists, wl.ch)
			close(wl.gone)
		}
	}
	p.dl.remove(pc)
	pc.state = connBusy
}

// takeListLocked takes every call off wl.
func (p *parker) takeListLocked(wl *waitList, out []*pconn) []*pconn {
	for pc := wl.head; pc != nil; {
		next := pc.wnext
		pc.wl, pc.wprev, pc.wnext = nil, nil, nil
		p.dl.remove(pc)
		pc.state = connBusy
		out = append(out, pc)
		pc = next
	}
	wl.head = nil
	return out
}

// watch wakes the calls of wl once the head moves.
func (p *parker) watch(wl *waitList) {
	defer p.loops.Done()
	select {
	case <-wl.ch:
	case <-wl.gone:
		return
	case <-p.s.quit:
		return // shutdown takes every list
	}
	var woken []*pconn
	p.mu.Lock()
	if p.lists[wl.ch] == wl {
		delete(p.lists, wl.ch)
		woken = p.takeListLocked(wl, nil)
	}
	p.mu.Unlock()
	p.dispatch(taskWake, woken)
}

// hangUp ends the call of a connection whose client has gone, and closes it.
func (p *parker) hangUp(pc *pconn) {
	c := pc.call
	pc.call = call{}
	p.s.endPoll(c.pl)
	p.observe(&c, time.Now()) // counted as net/http counts a request whose client went away
	p.close(pc)
}

// observe counts c's request, answered at now, as the metrics of net/http's requests do.
func (p *parker) observe(c *call, now time.Time) {
	if c.get {
		p.getLat.Observe(now.Sub(c.start).Seconds())
		p.getOK.Inc()
		return
	}
	p.rpcLat.Observe(now.Sub(c.start).Seconds())
	p.rpcOK.Inc()
}

// dispatch hands connections to the workers, taskSize to a task, without waiting for them:
// the wakes and expiries of any number of connections are queued.
func (p *parker) dispatch(kind taskKind, pcs []*pconn) { p.tasks.put(kind, pcs) }

// dispatchReads hands connections whose requests read the log to the workers, a connection
// to a task, so that a read that hangs holds up no other connection's request while a
// worker is free. Once maxQueuedReads wait for a worker (every worker stuck in a read of a
// log that does not answer), it hands the others to net/http, which serves each request in
// a goroutine of its own: the caller never waits for a worker.
func (p *parker) dispatchReads(pcs []*pconn) {
	for _, pc := range p.tasks.putReads(pcs) {
		b := pc.buf
		pc.buf = nil
		p.handBack(pc, b)
	}
}

// eventLoop reads the poller's events: it reads the input that comes on an idle connection
// and parks the long-polls it can without reading the log, leaving other calls to a worker;
// a hang-up of a waiting connection ends its call. It never waits but for events.
func (p *parker) eventLoop(lw *worker) {
	defer p.loops.Done()
	evs := make([]rawpoll.Event, 256)
	var reads, gone []*pconn
	for {
		n, err := p.poll.Wait(evs)
		if err != nil {
			if !p.closing.Load() {
				p.fail(err)
			}
			return
		}
		reads, gone = reads[:0], gone[:0]
		p.mu.Lock()
		for _, ev := range evs[:n] {
			slot := uint32(ev.Key)
			if int(slot) >= len(p.conns) {
				continue
			}
			pc := p.conns[slot]
			if pc == nil || pc.key() != ev.Key {
				continue // a connection since closed or handed back
			}
			if ev.In {
				pc.in.Store(true)
			}
			if ev.Hup {
				pc.hup.Store(true)
			}
			switch pc.state {
			case connParked:
				// Input while waiting is a pipelined request, read once the call is
				// answered; a hang-up ends the call.
				if ev.Hup {
					p.unparkLocked(pc)
					gone = append(gone, pc)
				}
			case connIdle:
				p.dl.remove(pc)
				pc.state = connBusy
				reads = append(reads, pc)
			}
		}
		p.mu.Unlock()
		for _, pc := range gone {
			p.hangUp(pc)
		}
		toWorkers := reads[:0] // filtered in place
		for _, pc := range reads {
			if lw.serve(pc) {
				toWorkers = append(toWorkers, pc)
			}
		}
		reads = toWorkers
		p.dispatchReads(toWorkers)
	}
}

// timerLoop ends the waits that run out and closes connections idle for too long.
func (p *parker) timerLoop() {
	defer p.loops.Done()
	for {
		select {
		case <-p.dl.timer.C:
		case <-p.done:
			return
		}
		var waits, idles []*pconn
		p.mu.Lock()
		for _, pc := range p.dl.due(time.Now()) {
			switch pc.state {
			case connParked:
				p.unparkLocked(pc)
				waits = append(waits, pc)
			case connIdle:
				pc.state = connBusy
				idles = append(idles, pc)
			}
		}
		p.mu.Unlock()
		for _, pc := range idles {
			p.close(pc)
		}
		p.dispatch(taskExpire, waits)
	}
}

// fail switches the parker off after its poller failed: without it, the parker cannot
// tell when a client sends or hangs up. Every waiting call is answered at once (with what
// it has, as a wait that runs out is) and its connection handed to net/http, as are idle
// connections at once and busy ones once their request is answered; no connection is taken
// from now on, and long-polls wait in their requests' goroutines.
func (p *parker) fail(err error) {
	p.s.log.Error("long-polls wait in the HTTP server from now on: watching their connections failed", "err", err)
	var waits, idles []*pconn
	p.mu.Lock()
	p.failed = true
	p.off.Store(true)
	_ = p.poll.Close()
	for ch, wl := range p.lists {
		waits = p.takeListLocked(wl, waits)
		delete(p.lists, ch)
		close(wl.gone)
	}
	for _, pc := range p.conns {
		if pc != nil && pc.state == connIdle {
			p.dl.remove(pc)
			pc.state = connBusy
			idles = append(idles, pc)
		}
	}
	p.mu.Unlock()
	for _, pc := range idles {
		b := pc.buf
		pc.buf = nil
		p.handBack(pc, b)
	}
	p.dispatch(taskExpire, waits)
}

// shutdown answers every waiting call at once (with what it has, as a wait that runs out
// does), closes idle connections, and returns once the parker holds no connection but those
// whose reply is still being written (within the write timeout) to a client that does not
// read it; or when ctx ends first (a read of the log holding a worker up), with its error.
func (p *parker) shutdown(ctx context.Context) error {
	var waits, idles []*pconn
	p.mu.Lock()
	p.closed = true
	p.closing.Store(true)
	for ch, wl := range p.lists {
		waits = p.takeListLocked(wl, waits)
		delete(p.lists, ch)
	}
	for _, pc := range p.conns {
		if pc != nil && pc.state == connIdle {
			p.dl.remove(pc)
			pc.state = connBusy
			idles = append(idles, pc)
		}
	}
	p.checkDrainedLocked()
	p.mu.Unlock()
	for _, pc := range idles {
		p.close(pc)
	}
	p.dispatch(taskExpire, waits)
	var err error
	select {
	case <-p.drained:
	case <-ctx.Done():
		err = fmt.Errorf("long-polls still being answered were left: %w", ctx.Err())
	}
	_ = p.poll.Close()
	close(p.done)
	p.loops.Wait()
	p.tasks.close()
	p.cancel()
	return err
}

// --- the workers' queue -------------------------------------------------------------------------

// maxQueuedReads bounds the connections whose requests wait for a worker: past it, they go
// to net/http (dispatchReads).
const maxQueuedReads = 4096

// taskQueue holds the workers' tasks, first in first out. Putting a task in never waits:
// nothing that watches connections, heads or deadlines may wait for a worker, which may be
// stuck in a read of the log. It holds no more than a task per connection the parker holds
// (a connection is in one task at a time), and reads up to maxQueuedReads.
type taskQueue struct {
	mu     sync.Mutex
	more   sync.Cond // signalled when a task is put, broadcast when closed
	tasks  []parkTask
	head   int // tasks[head:] wait
	reads  int // connections in the read tasks waiting
	closed bool
}

func (q *taskQueue) init() { q.more.L = &q.mu }

// put queues tasks of up to taskSize of pcs.
func (q *taskQueue) put(kind taskKind, pcs []*pconn) {
	if len(pcs) == 0 {
		return
	}
	q.mu.Lock()
	for len(pcs) > 0 {
		n := min(len(pcs), taskSize)
		q.tasks = append(q.tasks, parkTask{kind: kind, pcs: append([]*pconn(nil), pcs[:n]...)})
		pcs = pcs[n:]
		q.more.Signal()
	}
	q.mu.Unlock()
}

// putReads queues a read task for each of pcs while fewer than maxQueuedReads wait, and
// returns those it did not queue.
func (q *taskQueue) putReads(pcs []*pconn) (rest []*pconn) {
	if len(pcs) == 0 {
		return nil
	}
	q.mu.Lock()
	n := min(len(pcs), max(0, maxQueuedReads-q.reads))
	for _, pc := range pcs[:n] {
		q.tasks = append(q.tasks, parkTask{kind: taskRead, pcs: []*pconn{pc}})
		q.more.Signal()
	}
	q.reads += n
	q.mu.Unlock()
	return pcs[n:]
}

// take waits for a task and takes it; ok is false once the queue is closed and empty.
func (q *taskQueue) take() (t parkTask, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.head == len(q.tasks) {
		if q.closed {
			return parkTask{}, false
		}
		q.more.Wait()
	}
	t = q.tasks[q.head]
	q.tasks[q.head] = parkTask{}
	q.head++
	if t.kind == taskRead {
		q.reads -= len(t.pcs)
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

// --- workers ----------------------------------------------------------------------------------

// worker serves the connections of tasks: it reads requests, answers them or parks them, and
// writes the replies of woken calls. Its buffers serve one connection at a time.
type worker struct {
	p     *parker
	in    []byte
	out   []byte
	quick bool // the event loop's: it leaves a call that would read the log to the workers
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
	forWorker                // the event loop's: a call that reads the log, left to a worker
)

// serve reads and answers pc's requests until it must wait for more input, parks a call,
// or hands the connection to net/http. The event loop's (quick) leaves a call that would
// read the log to a worker: true, with the request and what follows it in pc.buf, for the
// caller to hand pc to a worker.
func (w *worker) serve(pc *pconn) bool {
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
		req, n, st := parseRequest(b)
		switch st {
		case parseOK:
			pc.fresh = false
			if len(b) > n {
				pc.buf = bytes.Clone(b[n:]) // pipelined: served after this one
			}
			switch w.handle(pc, &req) {
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
func (w *worker) handle(pc *pconn, req *httpRequest) served {
	s := w.p.s
	c := call{get: req.get, close: req.close, start: time.Now()}
	if s.readToken != nil && !tokenIs(bearerOf(req.auth), *s.readToken) {
		return notForUs // net/http words the refusal
	}
	var p *eventsParams
	if req.get {
		values, err := url.ParseQuery(string(req.query))
		if err != nil {
			return notForUs
		}
		pp, err := paramsFromQuery(values)
		if err != nil {
			return notForUs
		}
		p = &pp
	} else {
		body := bytes.TrimSpace(req.body)
		if len(body) > 0 && body[0] == '[' {
			return notForUs // a batch
		}
		id, pp, call, _ := decodeCallValue(body)
		if !call {
			return notForUs // errors and notifications are answered by net/http
		}
		c.id, p = id, &pp
	}
	pl, rerr := s.initPoll(&pc.poll, w.p.ctx, p, callBudget{reply: s.cfg.MaxReplyBytes, force: true})
	if rerr != nil {
		return notForUs
	}
	var res result
	var done bool
	if w.quick {
		if !s.waitsAtOnce(pl) {
			return forWorker
		}
	} else {
		res, rerr, done = s.pollOnce(w.p.ctx, pl, false)
	}
	if !done {
		if rerr = s.countWaiter(pl); rerr == nil {
			c.pl, c.due = pl, c.start.Add(pl.wait)
			pc.call = c
			w.p.park(pc)
			return parkedCall
		}
	}
	s.endPoll(pl)
	return w.reply(pc, &c, res, rerr)
}

// wake reads again for a waiting call after the head moved: it answers, or waits on.
func (w *worker) wake(pc *pconn) {
	if res, rerr, ok := w.reread(pc); ok {
		w.answer(pc, res, rerr)
	}
}

// reread reads again for a waiting call after the head moved: its answer and true, or false
// when the call waits on (parked again) or was answered already (the node is shutting down).
func (w *worker) reread(pc *pconn) (result, *rpcError, bool) {
	if w.p.closing.Load() {
		w.expire(pc)
		return result{}, nil, false
	}
	res, rerr, done := w.p.s.pollOnce(w.p.ctx, pc.call.pl, true)
	if !done {
		if time.Now().Before(pc.call.due) {
			w.p.park(pc)
			return result{}, nil, false
		}
		res = w.p.s.emptyPage(pc.call.pl)
	}
	return res, rerr, true
}

// expire answers a waiting call with what it has.
func (w *worker) expire(pc *pconn) { w.answer(pc, w.p.s.emptyPage(pc.call.pl), nil) }

// answer ends pc's call with its reply, then serves the connection on.
func (w *worker) answer(pc *pconn, res result, rerr *rpcError) {
	c := w.endCall(pc)
	if w.reply(pc, &c, res, rerr) == replied {
		w.next(pc)
	}
}

// endCall takes pc's call off it and ends it (it no longer counts among the waiters): its
// reply is the caller's to write.
func (w *worker) endCall(pc *pconn) call {
	c := pc.call
	pc.call = call{}
	w.p.s.endPoll(c.pl)
	return c
}

// closesAfter says whether the connection closes after the reply to c.
func (p *parker) closesAfter(c *call) bool { return c.close || p.closing.Load() }

// next serves pc after a reply: a pipelined request, or input that has come, else it waits
// idle.
func (w *worker) next(pc *pconn) {
	if w.p.off.Load() {
		b := pc.buf
		pc.buf = nil
		w.p.handBack(pc, b)
		return
	}
	if (len(pc.buf) > 0 || w.p.idle(pc)) && w.serve(pc) {
		w.p.dispatchReads([]*pconn{pc})
	}
}

// reply writes the reply of c, whole, and releases res.
func (w *worker) reply(pc *pconn, c *call, res result, rerr *rpcError) served {
	closeAfter := w.p.closesAfter(c)
	b := w.compose(w.out[:0], c, res, rerr, closeAfter)
	if cap(b) <= 4*readBufSize {
		w.out = b[:0]
	}
	n, err := rawpoll.Write(pc.fd, b)
	return w.p.written(pc, b, n, err, closeAfter, c.start)
}

// compose appends the reply of c to b, releases res and counts the request.
func (w *worker) compose(b []byte, c *call, res result, rerr *rpcError, closeAfter bool) []byte {
	now := time.Now()
	b = w.p.appendReply(b, c, res, rerr, closeAfter, now)
	res.release()
	w.p.observe(c, now)
	return b
}

// written finishes a reply b of which n bytes were written (err: why not all): what became
// of pc.
func (p *parker) written(pc *pconn, b []byte, n int, err error, closeAfter bool, start time.Time) served {
	switch {
	case n == len(b) && closeAfter:
		p.close(pc)
		return released
	case n == len(b):
		return replied
	case err == nil || rawpoll.WouldBlock(err):
		p.slowWrite(pc, bytes.Clone(b[n:]), closeAfter, start)
		return released
	}
	p.close(pc)
	return released
}

// slowWrite finishes a reply the socket could not take at once, in a goroutine of its own,
// within the write timeout, then serves the connection on.
func (p *parker) slowWrite(pc *pconn, b []byte, closeAfter bool, start time.Time) {
	p.mu.Lock()
	p.writing++
	p.mu.Unlock()
	go func() {
		// A duplicate of the descriptor in Go's poller waits for room.
		fd, err := rawpoll.Dup(pc.fd)
		var c *net.TCPConn
		if err == nil {
			c, err = netConn(fd)
		}
		if err == nil {
			if d := pc.via.writeTimeout; d > 0 {
				_ = c.SetWriteDeadline(start.Add(d))
			}
			_, err = c.Write(b)
			c.Close()
		}
		p.mu.Lock()
		p.writing--
		p.mu.Unlock()
		if err != nil || closeAfter || p.closing.Load() {
			p.close(pc)
			return
		}
		(&worker{p: p}).next(pc)
	}()
}

// --- replies ------------------------------------------------------------------------------------

// appendReply appends the HTTP response to c, as net/http writes it for the handler of the
// events method (handleRPC, handleGetEvents).
func (p *parker) appendReply(b []byte, c *call, res result, rerr *rpcError, closeAfter bool, now time.Time) []byte {
	var ej []byte
	if rerr != nil {
		ej, _ = json.Marshal(rerr)
	}
	id := c.id
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	const rpcHead, rpcResult, rpcError = `{"jsonrpc":"2.0","id":`, `,"result":`, `,"error":`
	var n int
	switch {
	case c.get && rerr != nil:
		n = len(ej) + 1
	case c.get:
		n = len(res.b) + 1
	case rerr != nil:
		n = len(rpcHead) + len(id) + len(rpcError) + len(ej) + 2
	default:
		n = len(rpcHead) + len(id) + len(rpcResult) + len(res.b) + 2
	}
	b = append(b, "HTTP/1.1 200 OK\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(n), 10)
	b = append(b, "\r\nContent-Type: application/json\r\n"+StreamHeader+": "+StreamPath+"\r\n"...)
	if rerr != nil && rerr.retryAfter > 0 {
		b = append(b, "Retry-After: "...)
		b = strconv.AppendInt(b, int64(rerr.retryAfter), 10)
		b = append(b, "\r\n"...)
	}
	b = append(b, "Date: "...)
	b = p.appendDate(b, now)
	if closeAfter {
		b = append(b, "\r\nConnection: close"...)
	}
	b = append(b, "\r\n\r\n"...)
	switch {
	case c.get && rerr != nil:
		b = append(b, ej...)
	case c.get:
		b = append(b, res.b...)
	case rerr != nil:
		b = append(append(append(append(append(b, rpcHead...), id...), rpcError...), ej...), '}')
	default:
		b = append(append(append(append(append(b, rpcHead...), id...), rpcResult...), res.b...), '}')
	}
	return append(b, '\n')
}

type dateLine struct {
	sec int64
	b   []byte
}

// appendDate appends the Date of a reply, formatted once a second.
func (p *parker) appendDate(b []byte, now time.Time) []byte {
	d := p.date.Load()
	if d == nil || d.sec != now.Unix() {
		d = &dateLine{sec: now.Unix(), b: now.UTC().AppendFormat(nil, http.TimeFormat)}
		p.date.Store(d)
	}
	return append(b, d.b...)
}

// --- deadlines ------------------------------------------------------------------------------

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

type bucket struct{ head *pconn }

func (d *deadlines) init() {
	d.epoch = time.Now()
	d.buckets = make(map[int64]*bucket)
	d.timer = time.NewTimer(time.Hour)
	d.timer.Stop()
}

// add puts pc in the bucket of the first tick at or after at.
func (d *deadlines) add(pc *pconn, at time.Time) {
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

func (d *deadlines) remove(pc *pconn) {
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
func (d *deadlines) due(now time.Time) []*pconn {
	var out []*pconn
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

// --- the listener ------------------------------------------------------------------------------

// parkListener is a listener whose connections the parker reads first, and through whose
// Accept it hands connections to net/http.
type parkListener struct {
	net.Listener
	p                                        *parker
	headerTimeout, idleTimeout, writeTimeout time.Duration
	accepted                                 chan acceptResult
	back                                     chan net.Conn
	done                                     chan struct{}
	closeOnce                                sync.Once
	closeErr                                 error
}

type acceptResult struct {
	c   net.Conn
	err error
}

// parkKey marks the context of a connection net/http serves for a parkListener.
type parkKey struct{}

// Attach wraps ln so that long-polls on its connections are parked while they wait (see
// park.go), and sets up hs, which serves s, to serve them: serve hs on the listener it
// returns (hs.Serve(s.Attach(hs, ln))). hs's timeouts apply to the connections the parker
// holds: ReadHeaderTimeout before a connection's first request, IdleTimeout between
// requests, WriteTimeout to a reply. TLS is served as before, through net/http: serve a
// listener Attach has not wrapped. Where connections cannot be watched (not Linux), Attach
// returns ln as it is.
func (s *Server) Attach(hs *http.Server, ln net.Listener) net.Listener {
	p := s.parker()
	if p == nil {
		return ln
	}
	l := &parkListener{
		Listener: ln, p: p,
		headerTimeout: hs.ReadHeaderTimeout, idleTimeout: hs.IdleTimeout, writeTimeout: hs.WriteTimeout,
		accepted: make(chan acceptResult),
		back:     make(chan net.Conn, 64),
		done:     make(chan struct{}),
	}
	if l.headerTimeout <= 0 {
		l.headerTimeout = hs.ReadTimeout
	}
	if l.idleTimeout <= 0 {
		l.idleTimeout = hs.ReadTimeout
	}
	prev := hs.ConnContext
	hs.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if prev != nil {
			ctx = prev(ctx, c)
		}
		if bc, ok := c.(*backConn); ok && bc.via == l {
			ctx = context.WithValue(ctx, parkKey{}, l)
		}
		return ctx
	}
	hs.RegisterOnShutdown(func() { _ = s.Shutdown(context.Background()) })
	go l.acceptLoop()
	return l
}

// acceptLoop accepts connections into the parker's hold; those it cannot hold go to net/http.
func (l *parkListener) acceptLoop() {
	for {
		c, err := l.Listener.Accept()
		if tc, ok := c.(*net.TCPConn); ok && err == nil {
			if _, err := l.p.adopt(tc, l, nil, true); err == nil {
				continue
			}
		}
		select {
		case l.accepted <- acceptResult{c, err}:
		case <-l.done:
			if c != nil {
				c.Close()
			}
			return
		}
		if errors.Is(err, net.ErrClosed) {
			return
		}
	}
}

// Accept returns the connections for net/http: handed back by the parker, or accepted when
// the parker could not take them.
func (l *parkListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.back:
		return c, nil
	case r := <-l.accepted:
		return r.c, r.err
	case <-l.done:
		return nil, &net.OpError{Op: "accept", Net: l.Addr().Network(), Addr: l.Addr(), Err: net.ErrClosed}
	}
}

func (l *parkListener) Close() error {
	l.closeOnce.Do(func() {
		close(l.done)
		l.closeErr = l.Listener.Close()
	})
	return l.closeErr
}

// deliver hands c to net/http; once the listener is closed, c is closed.
func (l *parkListener) deliver(c net.Conn) {
	select {
	case l.back <- c:
	case <-l.done:
		c.Close()
	}
}

// backConn is a connection handed to net/http, with the bytes the parker read of it first.
type backConn struct {
	*net.TCPConn
	prefix []byte
	via    *parkListener
}

func (c *backConn) Read(b []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(b, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.TCPConn.Read(b)
}

// WriteTo copies what Read returns, the prefix first (rather than the socket's alone, as
// TCPConn.WriteTo would).
func (c *backConn) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(c.prefix)
	c.prefix = c.prefix[n:]
	if err != nil {
		return int64(n), err
	}
	m, err := c.TCPConn.WriteTo(w)
	return int64(n) + m, err
}

// --- from net/http to the parker --------------------------------------------------------------

// parkVia says through which listener the connection of r can be parked; nil when it cannot
// (TLS, HTTP/1.0, a listener not attached, or elsewhere than Linux).
func (s *Server) parkVia(r *http.Request) *parkListener {
	if r.ProtoMajor != 1 || r.ProtoMinor != 1 {
		return nil
	}
	l, _ := r.Context().Value(parkKey{}).(*parkListener)
	if l == nil || l.p.closing.Load() || l.p.off.Load() {
		return nil
	}
	return l
}

// parkRequest takes the connection of a request whose call must wait out of net/http and
// parks the call (counted among the waiters already); false when the connection cannot be
// taken, and the caller waits for the call as before. The request's body must be read.
func (s *Server) parkRequest(w http.ResponseWriter, r *http.Request, via *parkListener, c call) bool {
	sw := statusWriterOf(w)
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return false
	}
	if sw != nil {
		sw.parked = true
		c.start = sw.start
	}
	bc, ok := conn.(*backConn)
	if !ok {
		// Not the connection ConnContext saw: nothing to do but close it.
		conn.Close()
		s.endPoll(c.pl)
		return true
	}
	pending, _ := brw.Reader.Peek(brw.Reader.Buffered())
	pending = append(bytes.Clone(pending), bc.prefix...)
	pc, err := via.p.adopt(bc.TCPConn, via, pending, false)
	if err != nil {
		// The node is shutting down, or the parker cannot take the connection: answer
		// with what there is, then close it, or hand it back to net/http.
		closeAfter := c.close || errors.Is(err, errParkerClosed)
		now := time.Now()
		b := via.p.appendReply(nil, &c, s.emptyPage(c.pl), nil, closeAfter, now)
		s.endPoll(c.pl)
		via.p.observe(&c, now)
		_ = conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
		_, err = conn.Write(b)
		if err != nil || closeAfter {
			conn.Close()
			return true
		}
		_ = conn.SetWriteDeadline(time.Time{})
		via.deliver(&backConn{TCPConn: bc.TCPConn, prefix: pending, via: via})
		return true
	}
	pc.call = c
	via.p.park(pc)
	return true
}

// bearerOf returns the token of an Authorization value in the Bearer scheme, as bearer does.
func bearerOf(auth []byte) string {
	scheme, token, ok := bytes.Cut(auth, []byte(" "))
	if !ok || !asciiEqualFold(scheme, "Bearer") {
		return ""
	}
	return string(bytes.TrimLeft(token, " "))
}
