//go:build linux

package rawpoll_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/evtctl/evtctl/internal/rawpoll"
)

func newRing(t *testing.T, n uint32) *rawpoll.Ring {
	t.Helper()
	r, err := rawpoll.NewRing(n)
	if err != nil {
		t.Skipf("no io_uring here: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// Sends queued on several sockets are made by one Submit, each whole, each reported once
// with its own user data.
func TestRingSends(t *testing.T) {
	r := newRing(t, 8)
	const conns = 5
	var fds [conns]int
	var msgs [conns][]byte
	fars := make([]io.Reader, conns)
	for i := range conns {
		far, fd := pair(t)
		fars[i], fds[i] = far, fd
		msgs[i] = bytes.Repeat([]byte{byte('a' + i)}, 100+i)
		if err := r.Send(fd, msgs[i], uint64(10+i)); err != nil {
			t.Fatal(err)
		}
	}
	got := map[uint64]int32{}
	if err := r.Submit(func(ud uint64, res int32) {
		if _, dup := got[ud]; dup {
			t.Errorf("send %d reported twice", ud)
		}
		got[ud] = res
	}); err != nil {
		t.Fatal(err)
	}
	for i := range conns {
		if res, ok := got[uint64(10+i)]; !ok || int(res) != len(msgs[i]) {
			t.Errorf("send %d: result %d (reported %v), want %d", 10+i, res, ok, len(msgs[i]))
		}
		b := make([]byte, len(msgs[i]))
		if _, err := io.ReadFull(fars[i], b); err != nil || !bytes.Equal(b, msgs[i]) {
			t.Errorf("connection %d read %q, %v", i, b, err)
		}
	}
	if len(got) != conns {
		t.Errorf("%d results for %d sends", len(got), conns)
	}
	// The ring is free again: a second round on the same sockets.
	for i := range conns {
		if err := r.Send(fds[i], msgs[i][:1], uint64(i)); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	if err := r.Submit(func(uint64, int32) { n++ }); err != nil || n != conns {
		t.Fatalf("second submit: %d results, %v", n, err)
	}
}

// A send never waits for room: on a socket whose peer does not read, sends take what fits,
// then come back with EAGAIN; every byte reported sent reaches the peer, in order.
func TestRingSendNeverWaits(t *testing.T) {
	r := newRing(t, 4)
	far, fd := pair(t)
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 4096); err != nil {
		t.Fatal(err)
	}
	var sent bytes.Buffer
	chunk := make([]byte, 16<<10)
	again := false
	for i := 0; i < 1000 && !again; i++ {
		for j := range chunk {
			chunk[j] = byte(i + j)
		}
		if err := r.Send(fd, chunk, 1); err != nil {
			t.Fatal(err)
		}
		var res int32
		if err := r.Submit(func(_ uint64, r int32) { res = r }); err != nil {
			t.Fatal(err)
		}
		switch {
		case res == -int32(syscall.EAGAIN):
			again = true
		case res < 0:
			t.Fatalf("send: errno %d", -res)
		default:
			sent.Write(chunk[:res])
		}
	}
	if !again {
		t.Fatal("sends on a socket nobody reads never came back with EAGAIN")
	}
	got := make([]byte, sent.Len())
	_ = far.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(far, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, sent.Bytes()) {
		t.Fatal("the peer read other bytes than those reported sent")
	}
}

// A send to a peer that has gone fails with an error, and raises no SIGPIPE.
func TestRingSendToAClosedPeer(t *testing.T) {
	r := newRing(t, 4)
	far, fd := pair(t)
	far.Close()
	var res int32
	for i := 0; i < 50; i++ {
		if err := r.Send(fd, []byte("reply"), 0); err != nil {
			t.Fatal(err)
		}
		if err := r.Submit(func(_ uint64, r int32) { res = r }); err != nil {
			t.Fatal(err)
		}
		if res < 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if e := syscall.Errno(-res); e != syscall.EPIPE && e != syscall.ECONNRESET {
		t.Fatalf("sends to a closed peer: last result %d, want EPIPE or ECONNRESET", res)
	}
}

// No more sends are queued than the ring holds.
func TestRingFull(t *testing.T) {
	r := newRing(t, 2)
	_, fd := pair(t)
	var err error
	n := 0
	for ; n < 64; n++ {
		if err = r.Send(fd, []byte("x"), uint64(n)); err != nil {
			break
		}
	}
	if !errors.Is(err, rawpoll.ErrRingFull) || n < 2 {
		t.Fatalf("after %d sends: %v, want ErrRingFull", n, err)
	}
	got := 0
	if err := r.Submit(func(uint64, int32) { got++ }); err != nil || got != n {
		t.Fatalf("submit: %d of %d results, %v", got, n, fmt.Sprint(err))
	}
}

// Receives queued on several sockets are made by one Submit: what has come, the end of input
// on a socket whose peer has closed, and EAGAIN on one with nothing to read yet.
func TestRingRecvs(t *testing.T) {
	r := newRing(t, 8)
	farA, a := pair(t)
	farB, b := pair(t)
	_, c := pair(t)
	if _, err := farA.Write([]byte("GET /a")); err != nil {
		t.Fatal(err)
	}
	farB.Close()
	time.Sleep(50 * time.Millisecond) // the bytes and the end reach the near ends
	bufs := [][]byte{make([]byte, 64), make([]byte, 64), make([]byte, 64)}
	for i, fd := range []int{a, b, c} {
		if err := r.Recv(fd, bufs[i], uint64(i)); err != nil {
			t.Fatal(err)
		}
	}
	res := map[uint64]int32{}
	if err := r.Submit(func(ud uint64, n int32) { res[ud] = n }); err != nil {
		t.Fatal(err)
	}
	if res[0] != 6 || string(bufs[0][:6]) != "GET /a" {
		t.Errorf("a: %d %q", res[0], bufs[0][:max(res[0], 0)])
	}
	if n, ok := res[1]; !ok || n != 0 {
		t.Errorf("b, whose peer closed: %d (%v), want 0", n, ok)
	}
	if res[2] != -int32(syscall.EAGAIN) {
		t.Errorf("c, with nothing to read: %d, want -EAGAIN", res[2])
	}
}
