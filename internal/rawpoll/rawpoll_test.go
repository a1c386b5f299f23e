package rawpoll_test

import (
	"errors"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/evtctl/evtctl/internal/rawpoll"
)

// pair returns a connected loopback TCP pair: the far end as a net.Conn, the near end as a
// descriptor of its own.
func pair(t *testing.T) (net.Conn, int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	far, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { far.Close() })
	near, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer near.Close()
	rc, err := near.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	fd := -1
	var derr error
	if err := rc.Control(func(f uintptr) { fd, derr = rawpoll.Dup(int(f)) }); err != nil || derr != nil {
		t.Fatal(err, derr)
	}
	t.Cleanup(func() { rawpoll.Close(fd) })
	return far, fd
}

func TestPoller(t *testing.T) {
	if runtime.GOOS != "linux" {
		if _, err := rawpoll.New(); !errors.Is(err, errors.ErrUnsupported) {
			t.Fatalf("New: %v, want ErrUnsupported", err)
		}
		t.Skip("Linux only")
	}
	p, err := rawpoll.New()
	if err != nil {
		t.Fatal(err)
	}
	far, fd := pair(t)
	const key = 7<<32 | 3
	if err := p.Add(fd, key); err != nil {
		t.Fatal(err)
	}
	if err := rawpoll.EnableStamps(fd); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	if _, err := rawpoll.Read(fd, buf); !rawpoll.WouldBlock(err) {
		t.Fatalf("Read with nothing to read: %v", err)
	}
	sent := time.Now()
	if _, err := far.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	evs := make([]rawpoll.Event, 4)
	n, err := p.Wait(evs)
	if err != nil || n != 1 || evs[0].Key != key || !evs[0].In || evs[0].Hup {
		t.Fatalf("Wait: %d %v %+v", n, err, evs[:n])
	}
	var st rawpoll.Stamper
	m, at, err := st.Read(fd, buf)
	if err != nil || string(buf[:m]) != "hello" || at != 0 && (at < sent.Add(-time.Second).UnixNano() || at > time.Now().UnixNano()) {
		t.Fatalf("Stamper.Read: %q %v, arrived %v (sent %v)", buf[:m], err, time.Unix(0, at), sent)
	}
	// The kernel turns stamping on for every socket lazily, once a socket asks: the first
	// bytes may come unstamped (0, not known), later ones not.
	for i := 0; at == 0; i++ {
		if i == 100 {
			t.Fatal("nothing received was stamped")
		}
		time.Sleep(10 * time.Millisecond)
		sent = time.Now()
		if _, err := far.Write([]byte("again")); err != nil {
			t.Fatal(err)
		}
		if n, err := p.Wait(evs); err != nil || n != 1 {
			t.Fatalf("Wait: %d %v", n, err)
		}
		if m, at, err = st.Read(fd, buf); err != nil || string(buf[:m]) != "again" {
			t.Fatalf("Stamper.Read: %q %v", buf[:m], err)
		}
		if at != 0 && (at < sent.Add(-time.Second).UnixNano() || at > time.Now().UnixNano()) {
			t.Fatalf("arrived %v, sent %v", time.Unix(0, at), sent)
		}
	}
	if m, err := rawpoll.Write(fd, []byte("back")); m != 4 || err != nil {
		t.Fatalf("Write: %d %v", m, err)
	}
	got := make([]byte, 4)
	if _, err := far.Read(got); err != nil || string(got) != "back" {
		t.Fatalf("far end read %q %v", got, err)
	}

	// A hang-up.
	far.Close()
	n, err = p.Wait(evs)
	if err != nil || n != 1 || !evs[0].Hup {
		t.Fatalf("Wait after a hang-up: %d %v %+v", n, err, evs[:n])
	}
	if m, err := rawpoll.Read(fd, buf); m != 0 || err != nil {
		t.Fatalf("Read at the end: %d %v", m, err)
	}

	// Close ends a Wait under way.
	done := make(chan error, 1)
	go func() {
		_, err := p.Wait(evs)
		done <- err
	}()
	// Close once the Wait blocks in its system call, not before it has begun.
	for i := 0; !waitingInSyscall(); i++ {
		if i == 10_000 {
			t.Fatal("Wait never blocked in epoll_pwait")
		}
		time.Sleep(time.Millisecond)
	}
	go p.Close()
	select {
	case err := <-done:
		if !errors.Is(err, rawpoll.ErrClosed) {
			t.Fatalf("Wait under way when closed: %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end Wait")
	}
	if _, err := p.Wait(evs); !errors.Is(err, rawpoll.ErrClosed) {
		t.Fatalf("Wait after Close: %v, want ErrClosed", err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
}

// waitingInSyscall reports whether a goroutine is blocked in a system call within Poller.Wait.
func waitingInSyscall() bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "[syscall") && strings.Contains(g, "rawpoll.(*Poller).Wait") {
			return true
		}
	}
	return false
}
