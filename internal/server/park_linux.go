package server

import (
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// epoll watches parked connections for their clients' requests and hang-ups, edge-triggered,
// without a goroutine or a buffer per connection. Its own descriptor is waited on through
// Go's poller, so the goroutine that reads its events blocks no thread while nothing happens.
type epoll struct {
	fd   int
	file *os.File
	rc   syscall.RawConn
	raw  []unix.EpollEvent
}

func newPoller() (poller, error) {
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
	return &epoll{fd: fd, file: f, rc: rc, raw: make([]unix.EpollEvent, 256)}, nil
}

func (e *epoll) add(fd int, slot, gen uint32) error {
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLET, Fd: int32(slot), Pad: int32(gen)}
	return os.NewSyscallError("epoll_ctl", unix.EpollCtl(e.fd, unix.EPOLL_CTL_ADD, fd, &ev))
}

func (e *epoll) del(fd int) error {
	return os.NewSyscallError("epoll_ctl", unix.EpollCtl(e.fd, unix.EPOLL_CTL_DEL, fd, nil))
}

// wait blocks until there are events, and returns them; an error once closed.
func (e *epoll) wait(evs []pollEvent) (int, error) {
	raw := e.raw[:min(len(evs), len(e.raw))]
	var n int
	var werr error
	err := e.rc.Read(func(fd uintptr) bool {
		for {
			// With no timeout the call does not block: a raw one (see readFD).
			r, _, errno := syscall.RawSyscall6(syscall.SYS_EPOLL_PWAIT, fd, uintptr(unsafe.Pointer(&raw[0])), uintptr(len(raw)), 0, 0, 0)
			if errno == syscall.EINTR {
				continue
			}
			n, werr = int(r), nil
			if errno != 0 {
				n, werr = 0, errno
			}
			return n != 0 || werr != nil
		}
	})
	if err == nil {
		err = werr
	}
	if err != nil {
		return 0, err
	}
	for i, ev := range raw[:n] {
		evs[i] = pollEvent{
			slot: uint32(ev.Fd), gen: uint32(ev.Pad),
			in:  ev.Events&unix.EPOLLIN != 0,
			hup: ev.Events&(unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0,
		}
	}
	return n, nil
}

func (e *epoll) close() error { return e.file.Close() }

// Reads and writes of parked connections go straight to their descriptors, which Go's
// poller has set non-blocking: the parker owns a connection while it reads or writes it,
// and only an owner closes it. They are raw system calls: a call that cannot block need not
// tell the scheduler it might (entersyscall), which would have the scheduler's monitor, seeing
// processors in system calls all the time, wake every 20 µs and hand processors between
// threads, at the cost of context switches that a virtual machine makes dear.

func readFD(fd int, b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	for {
		n, _, errno := syscall.RawSyscall(syscall.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		switch errno {
		case 0:
			return int(n), nil
		case syscall.EINTR:
			continue
		}
		return 0, errno
	}
}

func writeFD(fd int, b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	for {
		n, _, errno := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		switch errno {
		case 0:
			return int(n), nil
		case syscall.EINTR:
			continue
		}
		return 0, errno
	}
}

func wouldBlock(err error) bool { return err == syscall.EAGAIN }

// dupFD duplicates fd, close-on-exec.
func dupFD(fd int) (int, error) {
	nfd, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	return nfd, os.NewSyscallError("fcntl", err)
}

func closeFD(fd int) error { return syscall.Close(fd) }
