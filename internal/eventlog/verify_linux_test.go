//go:build linux

package eventlog

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Verify reads a copy of a log on a read-only file system: it needs no write access (it takes
// no lock that would create or write a file).
func TestVerifyReadOnlyCopy(t *testing.T) {
	for _, withLock := range []bool{true, false} {
		name := "copied with its LOCK file"
		if !withLock {
			name = "copied without it"
		}
		t.Run(name, func(t *testing.T) {
			disk := smallDisk(t, "4m")
			dir := filepath.Join(disk, "log")
			l := openT(t, Options{Dir: dir, SegmentBytes: 8 << 10})
			appendN(t, l, 0, 600, 7)
			l.Close()
			if !withLock {
				os.Remove(filepath.Join(dir, "LOCK"))
			}
			if out, err := exec.Command("mount", "-o", "remount,ro", disk).CombinedOutput(); err != nil {
				t.Skipf("skipping: remounting read-only was refused: %v %s", err, strings.TrimSpace(string(out)))
			}
			r, err := Verify(dir)
			if err != nil || !r.Clean() || r.Records != 600 {
				t.Fatalf("verifying a read-only copy: %+v %v", r, err)
			}
		})
	}
}
