package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"syscall"

	"github.com/evtctl/evtctl/internal/emit"
	"github.com/evtctl/evtctl/internal/iostreams"
)

// goneError is a write to standard output or standard error that failed because the
// stream is closed: its reader went away (EPIPE: evtctl tail | head -2), or it was closed
// before evtctl started (EBADF: 2>&-). It ends the command quietly, with status 0.
type goneError struct {
	stream string // "stdout" or "stderr"
	err    error
}

func (e *goneError) Error() string { return "write " + e.stream + ": " + e.err.Error() }
func (e *goneError) Unwrap() error { return e.err }

// streamGone reports whether err is, or was caused by, a standard stream that is gone.
func streamGone(err error) bool {
	var ge *goneError
	return errors.As(err, &ge)
}

// closedPipe reports a write to a pipe whose reader has gone (`evtctl replay | head -1`):
// the command then ends quietly with status 0.
func closedPipe(err error) bool {
	return errors.Is(err, syscall.EPIPE) || streamGone(err)
}

// goneWriter passes writes on and reports, once, a stream that is gone.
type goneWriter struct {
	w      io.Writer
	stream string
	gone   func(error)
}

func (w *goneWriter) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	if err != nil && (errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.EBADF) || errors.Is(err, os.ErrClosed)) {
		ge := &goneError{stream: w.stream, err: err}
		w.gone(ge)
		return n, ge
	}
	return n, err
}

// streamWatch ends a command whose output can no longer go anywhere: when a write to
// stdout or stderr finds the stream closed, or (see watchReader) the reader of a stdout pipe
// has gone while the command waits for something to write, it calls stop with a *goneError.
// Until armed, it only marks such writes' errors.
type streamWatch struct {
	armed atomic.Bool
	stop  func(error)
}

// watchStreams wraps the streams that are not terminals (a terminal that goes away sends
// SIGHUP instead) so that writes to them report a closed stream.
func watchStreams(s *iostreams.IOStreams, stop func(error)) *streamWatch {
	w := &streamWatch{stop: stop}
	gone := func(err error) {
		if w.armed.Load() {
			w.stop(err)
		}
	}
	if !s.IsStdoutTTY() {
		s.Out = &goneWriter{w: s.Out, stream: "stdout", gone: gone}
	}
	if !s.IsStderrTTY() {
		s.ErrOut = &goneWriter{w: s.ErrOut, stream: "stderr", gone: gone}
	}
	return w
}

// arm makes a closed stream end the command.
func (w *streamWatch) arm() { w.armed.Store(true) }

// errStdoutGone is what ends a command when the reader of its stdout pipe has gone.
var errStdoutGone = &goneError{stream: "stdout", err: syscall.EPIPE}

// stdinData returns standard input for a command to read data from (events, --data, a
// token), announced on a terminal unless what is "": "reading WHAT from standard input;
// Ctrl-D to end". Its reads end with ctx, so Ctrl-C ends a command that waits for input from
// a terminal or from a pipe that stays open. Not for the terminal UI, which reads keys from
// the terminal itself.
func stdinData(ctx context.Context, s *iostreams.IOStreams, what string) io.Reader {
	if s.IsStdinTTY() && what != "" {
		fmt.Fprintf(s.ErrOut, "reading %s from standard input; Ctrl-D to end\n", what)
	}
	if emit.RegularFile(s.In) {
		return s.In // its reads never wait
	}
	return &ctxReader{ctx: ctx, r: s.In, res: make(chan readResult, 1)}
}

// ctxReader reads r until ctx ends; then Read returns ctx's error at once, also while a read
// of r waits, which is abandoned (with the command: nothing reads r after that).
type ctxReader struct {
	ctx  context.Context
	r    io.Reader
	res  chan readResult
	buf  []byte // the buffer of the read under way
	busy bool   // a read of r is under way
}

type readResult struct {
	n   int
	err error
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if !c.busy {
		// Into a buffer of its own: an abandoned read must not write into p later.
		if cap(c.buf) < len(p) {
			c.buf = make([]byte, len(p))
		}
		buf := c.buf[:len(p)]
		c.busy = true
		go func() {
			n, err := c.r.Read(buf)
			c.res <- readResult{n, err}
		}()
	}
	select {
	case rr := <-c.res:
		c.busy = false
		return copy(p, c.buf[:rr.n]), rr.err
	case <-c.ctx.Done():
		return 0, c.ctx.Err()
	}
}
