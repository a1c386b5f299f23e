package main

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// pipeCheckInterval is how often watchReader looks at a pipe with nothing to report.
const pipeCheckInterval = 200 * time.Millisecond

// watchReader calls gone when f is a pipe whose reader has closed its end, so that a
// command waiting for events (tail in a long-poll) ends with its reader (tail | head -2)
// rather than at its next write, which may never come. Linux reports POLLERR for the
// write end of a pipe without readers; poll is asked for no events, so a pipe with room
// to write does not wake it. It returns a function that stops watching.
func watchReader(f *os.File, gone func()) (stop func()) {
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		return func() {}
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return func() {}
	}
	fd := -1
	if rc.Control(func(v uintptr) { fd = int(v) }) != nil || fd < 0 {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		fds := []unix.PollFd{{Fd: int32(fd)}}
		for {
			select {
			case <-done:
				return
			default:
			}
			n, err := unix.Poll(fds, int(pipeCheckInterval/time.Millisecond))
			if err == nil && n > 0 && fds[0].Revents&(unix.POLLERR|unix.POLLHUP|unix.POLLNVAL) != 0 {
				gone()
				return
			}
		}
	}()
	return func() { close(done) }
}
