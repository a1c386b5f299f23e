// Package buildtest keeps the programs that tests build from released sources (servers and
// nodes built with the go command through the module proxy) in a directory kept between
// runs, and lets the test processes of one `go test ./...` build each one once.
package buildtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/evtctl/evtctl/internal/atomicfile"
	"github.com/evtctl/evtctl/internal/retry"
)

// Dir is the directory named by the environment variable env, else
// <user cache dir>/evtctl/<name> (a temporary directory's evtctl-<name> when there is no
// user cache directory).
func Dir(env, name string) string {
	if d := os.Getenv(env); d != "" {
		return d
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "evtctl-"+name)
	}
	return filepath.Join(cache, "evtctl", name)
}

// WaitLock takes the lock on the file at path, creating the file if needed, waiting while
// another process holds it (building what it guards) until ctx ends.
func WaitLock(ctx context.Context, path string) (*atomicfile.Lock, error) {
	for {
		l, err := atomicfile.TryLock(path)
		if !errors.Is(err, atomicfile.ErrLocked) {
			return l, err
		}
		if err := retry.Sleep(ctx, 50*time.Millisecond); err != nil {
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
	}
}

// LastLines is the last n lines of b, for a failure's message.
func LastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
