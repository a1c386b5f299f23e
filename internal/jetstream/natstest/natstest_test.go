package natstest

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"testing"

	"github.com/evtctl/evtctl/internal/atomicfile"
)

// waitLock waits while the lock is held elsewhere, takes it once it is released, and gives
// up when its context ends.
func TestWaitLockWaits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "LOCK")
	first, err := atomicfile.TryLock(path)
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := waitLock(cctx, path); !errors.Is(err, context.Canceled) {
		t.Fatalf("waitLock with an ended context while held: %v", err)
	}
	got := make(chan error, 1)
	var second *atomicfile.Lock
	go func() {
		var err error
		second, err = waitLock(context.Background(), path)
		got <- err
	}()
	// While it waits, the lock stays with the first holder.
	if _, err := atomicfile.TryLock(path); !errors.Is(err, atomicfile.ErrLocked) {
		t.Fatalf("TryLock while held and waited for: %v", err)
	}
	select {
	case err := <-got:
		t.Fatalf("waitLock returned while the lock was held: %v", err)
	default:
	}
	first.Unlock()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if _, err := atomicfile.TryLock(path); !errors.Is(err, atomicfile.ErrLocked) {
		t.Fatalf("TryLock after waitLock took it: %v", err)
	}
	second.Unlock()
}

// A missing directory is an error at once, not a lock to wait for.
func TestWaitLockMissingDirectory(t *testing.T) {
	_, err := waitLock(context.Background(), filepath.Join(t.TempDir(), "no", "LOCK"))
	if err == nil || errors.Is(err, atomicfile.ErrLocked) {
		t.Fatalf("err = %v, want a failure that is not ErrLocked", err)
	}
}

// A client port Start chose, taken by another process before the server could listen on
// it, is chosen again.
func TestStartChoosesAgainAPortTaken(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	picks := 0
	defer func(f func() (int, error)) { pickPort = f }(pickPort)
	first := pickPort
	pickPort = func() (int, error) {
		picks++
		if picks == 1 {
			return taken.Addr().(*net.TCPAddr).Port, nil
		}
		return first()
	}
	s := Start(t, Self(), Config{})
	if picks != 2 || s.Config.Port == taken.Addr().(*net.TCPAddr).Port {
		t.Fatalf("%d ports picked, the server on %d (taken: %s)", picks, s.Config.Port, taken.Addr())
	}
	if !s.Running() {
		t.Fatal("the server is not running")
	}
}

func init() { ServeIfAsked() } // a test binary started as nats-server serves and exits
