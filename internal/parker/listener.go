package parker

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// Listener is a listener whose connections the parker reads first, and through whose Accept
// it hands net/http the connections it does not keep.
type Listener struct {
	net.Listener
	p                                        *Parker
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

// listenerKey marks the context of a connection net/http serves for a Listener.
type listenerKey struct{}

// Attach wraps ln so that the parker reads its connections first, and sets up hs to serve
// those it hands over: serve hs on the listener it returns (hs.Serve(p.Attach(hs, ln))).
// hs's timeouts apply to the connections the parker holds: ReadHeaderTimeout before a
// connection's first request, IdleTimeout between requests (either ReadTimeout when not
// set), WriteTimeout to a reply. TLS is served as before, through net/http: serve a
// listener Attach has not wrapped.
func (p *Parker) Attach(hs *http.Server, ln net.Listener) *Listener {
	l := &Listener{
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
			ctx = context.WithValue(ctx, listenerKey{}, l)
		}
		return ctx
	}
	go l.acceptLoop()
	return l
}

// acceptLoop accepts connections into the parker's hold; those it cannot hold (the parker
// is shutting down or off, or the connection is not TCP) go to net/http.
func (l *Listener) acceptLoop() {
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
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.back:
		return c, nil
	case r := <-l.accepted:
		return r.c, r.err
	case <-l.done:
		return nil, &net.OpError{Op: "accept", Net: l.Addr().Network(), Addr: l.Addr(), Err: net.ErrClosed}
	}
}

// Close closes the listener: net/http's Accept returns, and a connection handed back from
// then on is closed.
func (l *Listener) Close() error {
	l.closeOnce.Do(func() {
		close(l.done)
		l.closeErr = l.Listener.Close()
	})
	return l.closeErr
}

// deliver hands c to net/http; once the listener is closed, c is closed.
func (l *Listener) deliver(c net.Conn) {
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
	via    *Listener
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

// Via says through which Listener the connection of r can be parked; nil when it cannot
// (TLS, HTTP/1.0, a listener not attached, a parker shutting down or off).
func Via(r *http.Request) *Listener {
	if r.ProtoMajor != 1 || r.ProtoMinor != 1 {
		return nil
	}
	l, _ := r.Context().Value(listenerKey{}).(*Listener)
	if l == nil || l.p.closing.Load() || l.p.off.Load() {
		return nil
	}
	return l
}

// Park takes the connection of a request net/http serves out of net/http and parks its
// call, which waits (call.Waits): false when the connection cannot be taken, and the caller
// waits for the call as before. The request's body must have been read. clientClose: the
// request asked to close the connection after the reply; start: when it came. Should the
// parker have stopped taking connections meanwhile, the call is answered at once with what it
// has (call.Expire).
func (l *Listener) Park(w http.ResponseWriter, call Call, clientClose bool, start time.Time) bool {
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return false
	}
	bc, ok := conn.(*backConn)
	if !ok || bc.via != l {
		// Not the connection ConnContext saw: nothing to do but close it.
		conn.Close()
		call.HangUp()
		return true
	}
	pending, _ := brw.Reader.Peek(brw.Reader.Buffered())
	pending = append(bytes.Clone(pending), bc.prefix...)
	pc, err := l.p.adopt(bc.TCPConn, l, pending, false)
	if err != nil {
		// Answer with what there is, then close the connection (the node is shutting
		// down) or hand it back to net/http.
		closeAfter := clientClose || errors.Is(err, errClosed)
		b := call.Expire(closeAfter, nil)
		_ = conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if _, err := conn.Write(b); err != nil || closeAfter {
			conn.Close()
			return true
		}
		_ = conn.SetWriteDeadline(time.Time{})
		l.deliver(&backConn{TCPConn: bc.TCPConn, prefix: pending, via: l})
		return true
	}
	pc.call, pc.close, pc.start = call, clientClose, start
	l.p.park(pc)
	return true
}
