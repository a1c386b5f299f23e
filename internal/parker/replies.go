package parker

import (
	"bytes"
	"net"
	"time"

	"github.com/evtctl/evtctl/internal/rawpoll"
)

// send writes a reply b, whole, to pc; closeAfter: the connection closes after it. start is
// when the request came: the write timeout counts from it.
func (w *worker) send(pc *conn, b []byte, closeAfter bool, start time.Time) served {
	if cap(b) <= 4*readBufSize {
		w.out = b[:0] // the worker's buffer for the next reply
	}
	n, err := rawpoll.Write(pc.fd, b)
	return w.p.written(pc, b, n, err, closeAfter, start)
}

// written finishes a reply b of which n bytes were written (err: why not all): what became
// of pc.
func (p *Parker) written(pc *conn, b []byte, n int, err error, closeAfter bool, start time.Time) served {
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
func (p *Parker) slowWrite(pc *conn, b []byte, closeAfter bool, start time.Time) {
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
