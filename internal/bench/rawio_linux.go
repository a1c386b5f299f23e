package bench

import (
	"io"
	"net"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rawIO reads and writes a TCP connection with raw system calls on its non-blocking
// descriptor, waiting in Go's poller when a call would block: a call that cannot block need
// not tell the scheduler it might, which with thousands of pollers keeps the scheduler's
// monitor waking every 20 µs and handing processors between threads. It also asks the
// kernel for the time each reply reached the socket (SO_TIMESTAMPNS), so that a reply's
// wake is timed from its arrival, not from when the bench's goroutine came to read it.
// nil for other connections (TLS).
func rawIO(c net.Conn) io.ReadWriter {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	r := &rawConnIO{rc: rc, oob: make([]byte, 64)}
	_ = rc.Control(func(fd uintptr) {
		r.stamps = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1) == nil
	})
	r.msg.Iov = &r.iov
	r.msg.Iovlen = 1
	r.readFn = r.recv
	r.writeFn = func(fd uintptr) bool { return r.do(syscall.SYS_WRITE, fd) }
	return r
}

type rawConnIO struct {
	rc              syscall.RawConn
	b               []byte
	n               int
	err             error
	readFn, writeFn func(uintptr) bool

	stamps bool // the kernel stamps what it receives
	msg    syscall.Msghdr
	iov    syscall.Iovec
	oob    []byte
	at     int64 // Unix nanoseconds the data last read reached the socket; 0 when not known
}

// arrived is when the bytes last read reached the socket, in Unix nanoseconds; 0 when not
// known.
func (r *rawConnIO) arrived() int64 { return r.at }

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

// recv reads with recvmsg, to have the time of arrival; false when it would block.
func (r *rawConnIO) recv(fd uintptr) bool {
	if !r.stamps {
		return r.do(syscall.SYS_READ, fd)
	}
	r.iov.Base = &r.b[0]
	r.iov.SetLen(len(r.b))
	r.msg.Control = &r.oob[0]
	r.msg.SetControllen(len(r.oob))
	for {
		n, _, errno := syscall.RawSyscall(syscall.SYS_RECVMSG, fd, uintptr(unsafe.Pointer(&r.msg)), 0)
		switch errno {
		case 0:
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		default:
			r.n, r.err = 0, errno
			return true
		}
		r.n, r.err = int(n), nil
		if n > 0 {
			r.at = 0
			if cms, err := syscall.ParseSocketControlMessage(r.oob[:r.msg.Controllen]); err == nil {
				for _, cm := range cms {
					if cm.Header.Level == unix.SOL_SOCKET && cm.Header.Type == unix.SCM_TIMESTAMPNS && len(cm.Data) >= int(unsafe.Sizeof(unix.Timespec{})) {
						ts := (*unix.Timespec)(unsafe.Pointer(&cm.Data[0]))
						r.at = ts.Nano()
					}
				}
			}
		}
		return true
	}
}

func (r *rawConnIO) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	r.b = b
	err := r.rc.Read(r.readFn)
	r.b, r.iov.Base = nil, nil
	if err != nil {
		return 0, err
	}
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
