// Package rawpoll watches many connections' descriptors without a goroutine each: an epoll
// instance of its own (edge-triggered, for input and hang-up), waited on in a system call of
// its own rather than in Go's poller, and raw system calls to read and write non-blocking
// descriptors. Linux only: elsewhere New returns errors.ErrUnsupported.
package rawpoll

import "errors"

// ErrClosed is a Poller's Wait once it is closed.
var ErrClosed = errors.New("rawpoll: poller closed")

// Event is what happened on a descriptor added with key.
type Event struct {
	Key     uint64
	In, Hup bool // input (or its end) to read; the peer has closed or the connection failed
}
