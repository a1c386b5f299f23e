package buildtest

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/evtctl/evtctl/internal/atomicfile"
)

// WaitLock waits while the lock is held elsewhere, takes it once it is released, and gives
// up when its context ends.
func TestWaitLockWaits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "LOCK")
	first, err := atomicfile.TryLock(path)
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := WaitLock(cctx, path); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitLock with an ended context while held: %v", err)
	}
	got := make(chan error, 1)
	var second *atomicfile.Lock
	go func() {
		var err error
		second, err = WaitLock(context.Background(), path)
		got <- err
	}()
	// While it waits, the lock stays with the first holder.
	if _, err := atomicfile.TryLock(path); !errors.Is(err, atomicfile.ErrLocked) {
		t.Fatalf("TryLock while held and waited for: %v", err)
	}
	select {
	case err := <-got:
		t.Fatalf("WaitLock returned while the lock was held: %v", err)
	default:
	}
	first.Unlock()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if _, err := atomicfile.TryLock(path); !errors.Is(err, atomicfile.ErrLocked) {
		t.Fatalf("TryLock after WaitLock took it: %v", err)
	}
	second.Unlock()
}

// A missing directory is an error at once, not a lock to wait for.
func TestWaitLockMissingDirectory(t *testing.T) {
	_, err := WaitLock(context.Background(), filepath.Join(t.TempDir(), "no", "LOCK"))
	if err == nil || errors.Is(err, atomicfile.ErrLocked) {
		t.Fatalf("err = %v, want a failure that is not ErrLocked", err)
	}
}
