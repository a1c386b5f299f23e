package main

import (
	"errors"
	"io"
	"os"
	"sync/atomic"
	"syscall"

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
