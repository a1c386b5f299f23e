// Package leaktest checks, for tests, that code leaves no goroutine or open file behind.
package leaktest

import (
	"os"
	"runtime"
	"testing"
	"time"
)

// Check notes the goroutines and open files now; the function it returns waits (up to
// 10 s, for what is winding down) until both are back to those counts, and fails the test
// with every goroutine's stack if they are not.
func Check(t testing.TB) func() {
	t.Helper()
	g0, f0 := runtime.NumGoroutine(), OpenFiles()
	return func() {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			g, f := runtime.NumGoroutine(), OpenFiles()
			if g <= g0 && f <= f0 {
				return
			}
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				t.Fatalf("leaked: goroutines %d → %d, open files %d → %d\n%s", g0, g, f0, f, buf[:runtime.Stack(buf, true)])
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// OpenFiles is the number of files the process has open, or -1 where that cannot be
// read (no /proc).
func OpenFiles() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}
