// Package inprocess serves HTTP without sockets, for tests that run in a synctest bubble,
// where timers run on a fake clock but nothing may wait on a real connection: a Transport
// that hands each request to a handler in the calling goroutine, and a Listener whose
// connections are net.Pipe pairs, for an http.Server.
package inprocess

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
)

// Transport is an http.RoundTripper that serves each request with Handler, in the goroutine
// that sends it. A request whose context ends before the handler returns fails with the
// context's error, as it does for a client over a connection.
type Transport struct{ Handler http.Handler }

// RoundTrip serves req.
func (tr Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	sreq := req.Clone(req.Context())
	sreq.RequestURI = req.URL.RequestURI()
	sreq.RemoteAddr = "192.0.2.1:1234"
	if sreq.Body == nil {
		sreq.Body = http.NoBody
	}
	rec := httptest.NewRecorder()
	tr.Handler.ServeHTTP(rec, sreq)
	if err := req.Context().Err(); err != nil {
		return nil, err
	}
	resp := rec.Result()
	resp.Request = req
	return resp, nil
}

// Listener is a net.Listener whose connections are net.Pipe pairs, made by Dial.
type Listener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

// NewListener returns a Listener.
func NewListener() *Listener {
	return &Listener{conns: make(chan net.Conn), done: make(chan struct{})}
}

// Accept waits for the next Dial.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops Accept and Dial.
func (l *Listener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

// Addr is a made-up address.
func (l *Listener) Addr() net.Addr { return addr{} }

// Dial connects to the listener; it fits http.Transport's DialContext.
func (l *Listener) Dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type addr struct{}

func (addr) Network() string { return "pipe" }
func (addr) String() string  { return "inprocess:80" }
