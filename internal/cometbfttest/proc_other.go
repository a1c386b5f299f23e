//go:build !linux

package cometbfttest

import "os/exec"

// dieWithParent does nothing where the kernel cannot tie a child's life to its parent's:
// the tests stop their nodes when they end.
func dieWithParent(*exec.Cmd) {}
