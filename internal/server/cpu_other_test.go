//go:build !unix

package server_test

import (
	"testing"
	"time"
)

func cpuTime(t testing.TB) time.Duration {
	t.Skip("CPU time is measured with getrusage, which this system lacks")
	return 0
}

func openFileLimit(t testing.TB) uint64 {
	t.Skip("open files are counted with getrlimit, which this system lacks")
	return 0
}
