package parker

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"time"

	"github.com/evtctl/evtctl/internal/rawpoll"
)

// Connection states, changed under Parker.mu.
const (
	connBusy   = iota // a worker, a writer or a handler holds it
	connParked        // waiting: on a wait list and a deadline
	connIdle          // between requests: on a deadline, waiting for input
)

// conn is a connection the parker holds: its descriptor alone, out of Go's poller, so that
// its events are not read twice (by the parker and by the runtime), and it holds no more
// memory than its few links.
type conn struct {
	fd        int
	slot, gen uint32
	via       *Listener // where it goes back to net/http
	state     uint8
	fresh     bool        // no request yet: the header timeout applies while it is idle
	in        atomic.Bool // input since its last read
	hup       atomic.Bool // its client has closed its end
	buf       []byte      // bytes read and not yet served: a pipelined request
	call      Call        // the server's side of its calls; nil until its first request
	close     bool        // the waiting call's client asked to close the connection after the reply
	start     time.Time   // when the waiting call's request came: the reply's write timeout counts from it

	wl           *waitList
	wprev, wnext *conn
	bk           *bucket
	bprev, bnext *conn
}

// key is what the poller's events for pc carry: its slot and generation.
func (pc *conn) key() uint64 { return uint64(pc.slot) | uint64(pc.gen)<<32 }

// adopt takes c into the parker's hold, busy (its caller's), or idle and waiting for its
// first request when fresh. pending are bytes of it already read. c is closed, its socket
// kept in a descriptor of the parker's own; on an error c is as it was.
func (p *Parker) adopt(c *net.TCPConn, via *Listener, pending []byte, fresh bool) (*conn, error) {
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
		if p.closed {
			return nil, errClosed
		}
		return nil, errOff
	}
	var slot uint32
	if n := len(p.free); n > 0 {
		slot, p.free = p.free[n-1], p.free[:n-1]
	} else {
		slot = uint32(len(p.conns))
		p.conns = append(p.conns, nil)
	}
	p.gen++
	pc := &conn{fd: fd, slot: slot, gen: p.gen, via: via, buf: pending, fresh: fresh}
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
func (p *Parker) idleLocked(pc *conn) {
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
func (p *Parker) idle(pc *conn) bool {
	p.mu.Lock()
	switch {
	case p.closed:
		p.mu.Unlock()
		p.close(pc)
		return false
	case p.failed:
		p.mu.Unlock()
		p.handBack(pc, nil)
		return false
	case pc.in.Load() || pc.hup.Load():
		p.mu.Unlock()
		return true
	}
	p.idleLocked(pc)
	p.mu.Unlock()
	return false
}

// close closes a connection its caller holds.
func (p *Parker) close(pc *conn) {
	_ = rawpoll.Close(pc.fd)
	p.mu.Lock()
	p.releaseLocked(pc)
	p.mu.Unlock()
}

// handBack gives a connection its caller holds to net/http, with the bytes of it read and
// not served.
func (p *Parker) handBack(pc *conn, unread []byte) {
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
		p.log.Debug("handing a connection back to net/http", "err", err)
		return
	}
	pc.via.deliver(&backConn{TCPConn: c, prefix: bytes.Clone(unread), via: pc.via})
}

func (p *Parker) releaseLocked(pc *conn) {
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
func (p *Parker) checkDrainedLocked() {
	if p.closed && p.owned == p.writing {
		select {
		case <-p.drained:
		default:
			close(p.drained)
		}
	}
}
