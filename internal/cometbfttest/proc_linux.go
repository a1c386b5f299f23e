package cometbfttest

import (
	"os/exec"
	"syscall"
)

// dieWithParent has the kernel kill a node whose test process dies first (killed, or its
// output pipe closed), so that no node outlives its test.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
