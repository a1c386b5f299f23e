package eventlog

import (
	"os"
	"syscall"
)

// dataSync makes a file's data durable; its size and times need not be (fdatasync), which
// is enough for a file rewritten in place.
func dataSync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}
