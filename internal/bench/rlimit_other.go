//go:build !unix

package bench

import "time"

// raiseOpenFileLimit has nothing to raise here: the number of sockets a process may hold
// is not capped by an rlimit.
func raiseOpenFileLimit() (soft, hard uint64, err error) { return 0, 0, nil }

const openFileLimitKnown = false

const raiseLimitHelp = ""

// processCPU is not measured here.
func processCPU() (time.Duration, bool) { return 0, false }
