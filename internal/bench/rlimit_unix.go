//go:build unix

package bench

import (
	"fmt"
	"syscall"
	"time"
)

// raiseOpenFileLimit raises the soft limit on open files to the hard limit and reports
// both (after the change).
func raiseOpenFileLimit() (soft, hard uint64, err error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, 0, fmt.Errorf("reading the open-file limit: %w", err)
	}
	if lim.Cur < lim.Max {
		want := lim
		want.Cur = want.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err == nil {
			lim = want
		} else if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			return 0, 0, fmt.Errorf("reading the open-file limit: %w", err)
		}
	}
	return uint64(lim.Cur), uint64(lim.Max), nil
}

const openFileLimitKnown = true

// raiseLimitHelp says how to raise the hard limit on open files to {n}.
const raiseLimitHelp = "raise the hard limit for the shell that runs evtctl (as root: ulimit -Hn {n}; for a service: LimitNOFILE={n} in its systemd unit; for a login: a nofile line in /etc/security/limits.conf), then run again"

// processCPU is the CPU time this process has used, user and system.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
