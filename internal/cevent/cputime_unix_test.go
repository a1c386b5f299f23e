//go:build unix

package cevent

import "syscall"

// processCPU returns the CPU time (user+system) this process has used, in
// nanoseconds, so that benchmarks can report cost independent of other load
// on the machine.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
