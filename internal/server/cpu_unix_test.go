//go:build unix

package server_test

import (
	"syscall"
	"testing"
	"time"
)

// cpuTime is the CPU time the process has used so far, user and system (for benchmarks: the
// node's, when it runs in the benchmark's process). No test asserts on it.
func cpuTime(t testing.TB) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// openFileLimit is the process's soft limit on open files.
func openFileLimit(t testing.TB) uint64 {
	t.Helper()
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	return uint64(rl.Cur) // int64 on some systems
}
