package rawpoll

import (
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Poller is an epoll instance whose own descriptor Go's poller watches, so that a goroutine
// blocked in Wait holds no thread.
type Poller struct {
	fd   int
	file *os.File
	rc   syscall.RawConn
	raw  []unix.EpollEvent

	// Wait's: its call to rc.Read, made once, and what the call found
	waitFn func(fd uintptr) bool
	want   int
	n      int
	err    error
}

// New returns a Poller.
func New() (*Poller, error) {
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("setnonblock", err)
	}
	f := os.NewFile(uintptr(fd), "epoll")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	p := &Poller{fd: fd, file: f, rc: rc, raw: make([]unix.EpollEvent, 256)}
	p.waitFn = p.waitOnce
	return p, nil
}

// Add watches fd, edge-triggered, for input and hang-up; its events carry key.
func (p *Poller) Add(fd int, key uint64) error {
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLET, Fd: int32(key), Pad: int32(key >> 32)}
	return os.NewSyscallError("epoll_ctl", unix.EpollCtl(p.fd, unix.EPOLL_CTL_ADD, fd, &ev))
}

// Del stops watching fd.
func (p *Poller) Del(fd int) error {
	return os.NewSyscallError("epoll_ctl", unix.EpollCtl(p.fd, unix.EPOLL_CTL_DEL, fd, nil))
}

// Wait blocks until there are events and fills evs with them; an error once closed. Its
// caller makes one call at a time.
func (p *Poller) Wait(evs []Event) (int, error) {
	p.want = min(len(evs), len(p.raw))
	err := p.rc.Read(p.waitFn)
	n := p.n
	if err == nil {
		err = p.err
	}
	if err != nil {
		return 0, err
	}
	for i, ev := range p.raw[:n] {
		evs[i] = Event{
			Key: uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32,
			In:  ev.Events&unix.EPOLLIN != 0,
			Hup: ev.Events&(unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0,
		}
	}
	return n, nil
}

// waitOnce reads the events there are, without blocking: false when there are none yet.
func (p *Poller) waitOnce(fd uintptr) bool {
	for {
		// With no timeout the call does not block: a raw one (see Read).
		r, _, errno := syscall.RawSyscall6(syscall.SYS_EPOLL_PWAIT, fd, uintptr(unsafe.Pointer(&p.raw[0])), uintptr(p.want), 0, 0, 0)
		if errno == syscall.EINTR {
			continue
		}
		p.n, p.err = int(r), nil
		if errno != 0 {
			p.n, p.err = 0, errno
		}
		return p.n != 0 || p.err != nil
	}
}

// Close closes the Poller; a Wait under way returns an error.
func (p *Poller) Close() error { return p.file.Close() }

// Read and Write are raw system calls on a non-blocking descriptor: a call that cannot
// block need not tell the scheduler it might (entersyscall), which would have the scheduler's
// monitor, seeing processors in system calls all the time, wake every 20 µs and hand
// processors between threads, at the cost of context switches that a virtual machine makes
// dear. The caller must hold the descriptor open meanwhile.

// Read reads from fd; (0, nil) at the end of input, an error satisfying WouldBlock when
// there is nothing to read yet.
func Read(fd int, b []byte) (int, error) { return rw(syscall.SYS_READ, fd, b) }

// Write writes to fd as much as it takes now.
func Write(fd int, b []byte) (int, error) { return rw(syscall.SYS_WRITE, fd, b) }

func rw(trap uintptr, fd int, b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	for {
		n, _, errno := syscall.RawSyscall(trap, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		switch errno {
		case 0:
			return int(n), nil
		case syscall.EINTR:
			continue
		}
		return 0, errno
	}
}

// WouldBlock reports whether err says a call on a non-blocking descriptor would block.
func WouldBlock(err error) bool { return err == syscall.EAGAIN }

// Dup duplicates fd, close-on-exec.
func Dup(fd int) (int, error) {
	nfd, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	return nfd, os.NewSyscallError("fcntl", err)
}

// Close closes fd.
func Close(fd int) error { return syscall.Close(fd) }

// Stamper reads a socket with recvmsg, asking the kernel for the time its data arrived
// (SO_TIMESTAMPNS, set on the socket by EnableStamps). Its buffers serve one read at a time.
type Stamper struct {
	msg syscall.Msghdr
	iov syscall.Iovec
	oob [64]byte
}

// EnableStamps has the kernel stamp what socket fd receives.
func EnableStamps(fd int) error {
	return os.NewSyscallError("setsockopt", unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1))
}

// Read reads from fd as the package's Read does, and returns with the count when the data
// read arrived, in Unix nanoseconds (0 when not known).
func (s *Stamper) Read(fd int, b []byte) (n int, at int64, err error) {
	if len(b) == 0 {
		return 0, 0, nil
	}
	s.iov.Base = &b[0]
	s.iov.SetLen(len(b))
	s.msg.Iov = &s.iov
	s.msg.Iovlen = 1
	s.msg.Control = &s.oob[0]
	s.msg.SetControllen(len(s.oob))
	defer func() { s.iov.Base = nil }()
	for {
		r, _, errno := syscall.RawSyscall(syscall.SYS_RECVMSG, uintptr(fd), uintptr(unsafe.Pointer(&s.msg)), 0)
		switch errno {
		case 0:
		case syscall.EINTR:
			continue
		default:
			return 0, 0, errno
		}
		if r > 0 {
			if cms, err := syscall.ParseSocketControlMessage(s.oob[:s.msg.Controllen]); err == nil {
				for _, cm := range cms {
					if cm.Header.Level == unix.SOL_SOCKET && cm.Header.Type == unix.SCM_TIMESTAMPNS && len(cm.Data) >= int(unsafe.Sizeof(unix.Timespec{})) {
						at = (*unix.Timespec)(unsafe.Pointer(&cm.Data[0])).Nano()
					}
				}
			}
		}
		return int(r), at, nil
	}
}
