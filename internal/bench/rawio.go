package bench

import (
	"io"
	"net"
	"syscall"

	"github.com/evtctl/evtctl/internal/rawpoll"
)

// rawIO reads and writes a TCP connection with raw system calls on its non-blocking
// descriptor (rawpoll), waiting in Go's poller when a call would block, and has the kernel
// stamp the time each reply reached the socket, so that a reply's wake is timed from its
// arrival, not from when the bench came to read it. nil for other connections (TLS), and
// where raw calls are not made (not Linux).
func rawIO(c net.Conn) io.ReadWriter {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = rawpoll.EnableStamps(int(fd)) }); err != nil || serr != nil {
		return nil
	}
	r := &rawConnIO{rc: rc}
	r.readFn = func(fd uintptr) bool {
		r.n, r.at, r.err = r.stamper.Read(int(fd), r.b)
		return !rawpoll.WouldBlock(r.err)
	}
	r.writeFn = func(fd uintptr) bool {
		r.n, r.err = rawpoll.Write(int(fd), r.b)
		return !rawpoll.WouldBlock(r.err)
	}
	return r
}

type rawConnIO struct {
	rc              syscall.RawConn
	stamper         rawpoll.Stamper
	b               []byte
	n               int
	at              int64
	err             error
	arrival         int64
	readFn, writeFn func(uintptr) bool
}

// arrived is when the bytes last read reached the socket, in Unix nanoseconds; 0 when not
// known.
func (r *rawConnIO) arrived() int64 { return r.arrival }

func (r *rawConnIO) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	r.b = b
	err := r.rc.Read(r.readFn)
	r.b = nil
	if err != nil {
		return 0, err
	}
	if r.n == 0 && r.err == nil {
		return 0, io.EOF
	}
	if r.n > 0 {
		r.arrival = r.at
	}
	return r.n, r.err
}

func (r *rawConnIO) Write(b []byte) (int, error) {
	written := 0
	for written < len(b) {
		r.b = b[written:]
		if err := r.rc.Write(r.writeFn); err != nil {
			return written, err
		}
		if r.err != nil {
			return written, r.err
		}
		written += r.n
	}
	r.b = nil
	return written, nil
}
