package bench

import (
	"io"
	"net"
	"syscall"
	"unsafe"
)

// rawIO reads and writes a TCP connection with raw system calls on its non-blocking
// descriptor, waiting in Go's poller when the call would block: a call that cannot block need
// not tell the scheduler it might, which with thousands of pollers keeps the scheduler's
// monitor waking every 20 µs and handing processors between threads. nil for other
// connections (TLS).
func rawIO(c net.Conn) io.ReadWriter {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	r := &rawConnIO{rc: rc}
	r.readFn = func(fd uintptr) bool { return r.do(syscall.SYS_READ, fd) }
	r.writeFn = func(fd uintptr) bool { return r.do(syscall.SYS_WRITE, fd) }
	return r
}

type rawConnIO struct {
	rc              syscall.RawConn
	b               []byte
	n               int
	err             error
	readFn, writeFn func(uintptr) bool
}

// do makes one call; false when it would block.
func (r *rawConnIO) do(trap, fd uintptr) bool {
	for {
		n, _, errno := syscall.RawSyscall(trap, fd, uintptr(unsafe.Pointer(&r.b[0])), uintptr(len(r.b)))
		switch errno {
		case 0:
			r.n, r.err = int(n), nil
			return true
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		}
		r.n, r.err = 0, errno
		return true
	}
}

func (r *rawConnIO) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	r.b = b
	if err := r.rc.Read(r.readFn); err != nil {
		return 0, err
	}
	r.b = nil
	if r.n == 0 && r.err == nil {
		return 0, io.EOF
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
