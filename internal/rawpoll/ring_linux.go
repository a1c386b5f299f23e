package rawpoll

import (
	"errors"
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// An io_uring of the kernel's (5.6 and later), for socket sends and receives: a Ring makes
// those of many connections in one system call, where write(2) and read(2) take one each.
// Hand-written for its few calls: the ring's setup, its two mapped queues, two operations
// (IORING_OP_SEND, IORING_OP_RECV) and their completions. Every operation is non-blocking
// (MSG_DONTWAIT): the kernel completes it within the io_uring_enter that submits it — done,
// in part or whole, or refused with EAGAIN — and never waits for room or input, so Submit
// returns with every result and the buffers are free again.

// ringParams is struct io_uring_params.
type ringParams struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFd uint32
	resv                                                                   [3]uint32
	sqOff                                                                  ringSQOffsets
	cqOff                                                                  ringCQOffsets
}

// ringSQOffsets is struct io_sqring_offsets.
type ringSQOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

// ringCQOffsets is struct io_cqring_offsets.
type ringCQOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

// ringSQE is struct io_uring_sqe (64 bytes), with the fields a send uses named.
type ringSQE struct {
	opcode   uint8
	flags    uint8
	ioprio   uint16
	fd       int32
	off      uint64
	addr     uint64
	len      uint32
	msgFlags uint32
	userData uint64
	_        [24]byte
}

// ringCQE is struct io_uring_cqe.
type ringCQE struct {
	userData uint64
	res      int32
	flags    uint32
}

const (
	sysIOUringSetup = 425 // the same number on every architecture
	sysIOUringEnter = 426

	ringOffSQRing = 0
	ringOffCQRing = 0x8000000
	ringOffSQEs   = 0x10000000

	opSend         = 26 // IORING_OP_SEND
	opRecv         = 27 // IORING_OP_RECV
	enterGetEvents = 1  // IORING_ENTER_GETEVENTS
)

// Ring sends and receives on many sockets in one system call. It is not safe for
// concurrent use.
type Ring struct {
	fd       int
	maps     [][]byte
	sqTail   *uint32
	sqMask   uint32
	sqArray  []uint32
	sqes     []ringSQE
	cqHead   *uint32
	cqTail   *uint32
	cqMask   uint32
	cqes     []ringCQE
	queued   uint32
	capacity uint32
}

// NewRing returns a Ring that holds up to n sends between Submits (n a power of two), or an
// error where the kernel has no io_uring, or refuses it to this process.
func NewRing(n uint32) (*Ring, error) {
	var p ringParams
	fd, _, errno := syscall.Syscall(sysIOUringSetup, uintptr(n), uintptr(unsafe.Pointer(&p)), 0)
	if errno != 0 {
		return nil, os.NewSyscallError("io_uring_setup", errno)
	}
	r := &Ring{fd: int(fd), capacity: p.sqEntries}
	mmap := func(off int64, size uint32) ([]byte, error) {
		b, err := unix.Mmap(r.fd, off, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
		if err != nil {
			return nil, os.NewSyscallError("mmap", err)
		}
		r.maps = append(r.maps, b)
		return b, nil
	}
	sq, err := mmap(ringOffSQRing, p.sqOff.array+p.sqEntries*4)
	if err != nil {
		r.Close()
		return nil, err
	}
	cq, err := mmap(ringOffCQRing, p.cqOff.cqes+p.cqEntries*uint32(unsafe.Sizeof(ringCQE{})))
	if err != nil {
		r.Close()
		return nil, err
	}
	sqes, err := mmap(ringOffSQEs, p.sqEntries*uint32(unsafe.Sizeof(ringSQE{})))
	if err != nil {
		r.Close()
		return nil, err
	}
	r.sqTail = (*uint32)(unsafe.Pointer(&sq[p.sqOff.tail]))
	r.sqMask = *(*uint32)(unsafe.Pointer(&sq[p.sqOff.ringMask]))
	r.sqArray = unsafe.Slice((*uint32)(unsafe.Pointer(&sq[p.sqOff.array])), p.sqEntries)
	r.sqes = unsafe.Slice((*ringSQE)(unsafe.Pointer(&sqes[0])), p.sqEntries)
	r.cqHead = (*uint32)(unsafe.Pointer(&cq[p.cqOff.head]))
	r.cqTail = (*uint32)(unsafe.Pointer(&cq[p.cqOff.tail]))
	r.cqMask = *(*uint32)(unsafe.Pointer(&cq[p.cqOff.ringMask]))
	r.cqes = unsafe.Slice((*ringCQE)(unsafe.Pointer(&cq[p.cqOff.cqes])), p.cqEntries)
	return r, nil
}

// Send queues a non-blocking send of b on socket fd, to be made by Submit; b must not
// change, nor fd close, until Submit returns.
func (r *Ring) Send(fd int, b []byte, userData uint64) error {
	return r.queue(opSend, fd, b, unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL, userData)
}

// Recv queues a non-blocking receive into b from socket fd, to be made by Submit; b must
// not be used, nor fd closed, until Submit returns. Its result is the count of bytes read,
// 0 at the end of input, or -EAGAIN when there is nothing to read.
func (r *Ring) Recv(fd int, b []byte, userData uint64) error {
	return r.queue(opRecv, fd, b, unix.MSG_DONTWAIT, userData)
}

func (r *Ring) queue(op uint8, fd int, b []byte, flags uint32, userData uint64) error {
	if r.queued == r.capacity {
		return ErrRingFull
	}
	tail := *r.sqTail
	i := tail & r.sqMask
	e := &r.sqes[i]
	*e = ringSQE{opcode: op, fd: int32(fd), len: uint32(len(b)), msgFlags: flags, userData: userData}
	if len(b) > 0 {
		e.addr = uint64(uintptr(unsafe.Pointer(&b[0])))
	}
	r.sqArray[i] = i
	atomic.StoreUint32(r.sqTail, tail+1) // the kernel reads the entry once it sees the tail
	r.queued++
	return nil
}

// Submit makes the sends queued and calls done with each one's user data and result: the
// count of bytes sent, or a negated errno (-EAGAIN: no room in the socket now). On an error
// of io_uring_enter itself, done is called for the sends whose results came, the others may
// or may not have been made, and the Ring is not to be used again but closed.
func (r *Ring) Submit(done func(userData uint64, res int32)) error {
	var err error
	for want := r.queued; want > 0; {
		n, _, errno := syscall.RawSyscall6(sysIOUringEnter, uintptr(r.fd), uintptr(r.queued), uintptr(want), enterGetEvents, 0, 0)
		if errno == syscall.EINTR {
			continue
		}
		if errno != 0 {
			err = os.NewSyscallError("io_uring_enter", errno)
			break
		}
		r.queued -= uint32(n)
		got := r.reap(done)
		want -= min(got, want)
		if n == 0 && got == 0 {
			err = errors.New("io_uring_enter: no progress")
			break
		}
	}
	r.queued = 0
	return err
}

// reap calls done for each completion waiting and returns their count.
func (r *Ring) reap(done func(userData uint64, res int32)) uint32 {
	var n uint32
	for {
		head := *r.cqHead
		if head == atomic.LoadUint32(r.cqTail) {
			return n
		}
		c := r.cqes[head&r.cqMask]
		atomic.StoreUint32(r.cqHead, head+1)
		n++
		done(c.userData, c.res)
	}
}

// Close releases the ring.
func (r *Ring) Close() error {
	for _, b := range r.maps {
		_ = unix.Munmap(b)
	}
	r.maps = nil
	return unix.Close(r.fd)
}
