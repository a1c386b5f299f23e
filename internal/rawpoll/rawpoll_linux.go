package rawpoll

import (
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Poller is an epoll instance. Wait blocks its goroutine's thread in epoll_pwait, not in Go's
// poller: input on the connections it watches wakes a thread only while a Wait is under
// way, so that its caller, between Waits, lets input gather and takes it in one look.
type Poller struct {
	fd   int
	wake int // an eventfd in the epoll set: Close writes it to end a Wait under way
	raw  []unix.EpollEvent

	mu     sync.Mutex // held by Wait: Close closes the descriptors once no Wait uses them
	closed atomic.Bool
}

// wakeKey is the key of the Poller's own eventfd among its events.
const wakeKey = ^uint64(0)

// New returns a Poller.
func New() (*Poller, error) {
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("eventfd", err)
	}
	p := &Poller{fd: fd, wake: wake, raw: make([]unix.EpollEvent, 256)}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: -1, Pad: -1} // wakeKey
	if err := unix.EpollCtl(fd, unix.EPOLL_CTL_ADD, wake, &ev); err != nil {
		unix.Close(wake)
		unix.Close(fd)
		return nil, os.NewSyscallError("epoll_ctl", err)
	}
	return p, nil
}

// Add watches fd, edge-triggered, for input and hang-up; its events carry key, which must
// not be wakeKey (all ones), the Poller's own.
func (p *Poller) Add(fd int, key uint64) error {
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLET, Fd: int32(key), Pad: int32(key >> 32)}
	return os.NewSyscallError("epoll_ctl", unix.EpollCtl(p.fd, unix.EPOLL_CTL_ADD, fd, &ev))
}

// Del stops watching fd.
func (p *Poller) Del(fd int) error {
	return os.NewSyscallError("epoll_ctl", unix.EpollCtl(p.fd, unix.EPOLL_CTL_DEL, fd, nil))
}

// Wait blocks until there are events and fills evs with them; ErrClosed once the Poller is
// closed. Its caller makes one call at a time, and its thread blocks meanwhile (a system call,
// as a file's read is), which Go's scheduler replaces for its other goroutines.
func (p *Poller) Wait(evs []Event) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	raw := p.raw[:min(len(evs), len(p.raw))]
	for {
		if p.closed.Load() {
			return 0, ErrClosed
		}
		// First a look that cannot block: a raw call, which the scheduler need not hear of
		// (see Read); only when it finds nothing, a call that waits.
		r, _, errno := syscall.RawSyscall6(syscall.SYS_EPOLL_PWAIT, uintptr(p.fd), uintptr(unsafe.Pointer(&raw[0])), uintptr(len(raw)), 0, 0, 0)
		if errno == 0 && r == 0 {
			r, _, errno = syscall.Syscall6(syscall.SYS_EPOLL_PWAIT, uintptr(p.fd), uintptr(unsafe.Pointer(&raw[0])), uintptr(len(raw)), ^uintptr(0), 0, 0)
		}
		switch errno {
		case 0:
		case syscall.EINTR:
			continue
		default:
			return 0, os.NewSyscallError("epoll_pwait", errno)
		}
		n := 0
		for _, ev := range raw[:r] {
			key := uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
			if key == wakeKey {
				continue
			}
			evs[n] = Event{
				Key: key,
				In:  ev.Events&unix.EPOLLIN != 0,
				Hup: ev.Events&(unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0,
			}
			n++
		}
		if n > 0 {
			return n, nil
		}
	}
}

// Close closes the Poller: a Wait under way returns ErrClosed, and Close returns once it has.
func (p *Poller) Close() error {
	if p.closed.Swap(true) {
		return nil
	}
	one := [8]byte{1} // a count of 1 on little-endian machines; any count above 0 makes it readable
	_, _ = unix.Write(p.wake, one[:])
	p.mu.Lock()
	defer p.mu.Unlock()
	_ = unix.Close(p.wake)
	return os.NewSyscallError("close", unix.Close(p.fd))
}

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
