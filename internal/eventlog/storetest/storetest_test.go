package storetest_test

import (
	"bytes"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/evtctl/evtctl/internal/eventlog"
	"github.com/evtctl/evtctl/internal/eventlog/storetest"
)

// The embedded log passes the suite in memory and on disk (with tiny segments, so that
// reads cross segment boundaries).
func TestEmbeddedLog(t *testing.T) {
	for _, disk := range []bool{false, true} {
		name := "memory"
		if disk {
			name = "disk"
		}
		t.Run(name, func(t *testing.T) {
			var mu sync.Mutex
			dirs := map[eventlog.Store]string{}
			opts := func(cfg storetest.Config, dir string) eventlog.Options {
				return eventlog.Options{Dir: dir, SegmentBytes: 4096, MaxItems: cfg.MaxItems, DedupeWindow: cfg.DedupeWindow}
			}
			open := func(t testing.TB, cfg storetest.Config, dir string) eventlog.Store {
				l, err := eventlog.Open(opts(cfg, dir))
				if err != nil {
					t.Fatal(err)
				}
				mu.Lock()
				dirs[l] = dir
				mu.Unlock()
				return l
			}
			b := storetest.Backend{
				Open: func(t testing.TB, cfg storetest.Config) eventlog.Store {
					dir := ""
					if disk {
						dir = t.TempDir()
					}
					return open(t, cfg, dir)
				},
			}
			if disk {
				b.Reopen = func(t testing.TB, s eventlog.Store, cfg storetest.Config) eventlog.Store {
					if err := s.Close(); err != nil {
						t.Fatal(err)
					}
					mu.Lock()
					dir := dirs[s]
					mu.Unlock()
					return open(t, cfg, dir)
				}
				// Events are lost by flipping a byte of their records on disk while the log
				// is closed.
				b.Lose = func(t testing.TB, s eventlog.Store, lost []storetest.Lost) eventlog.Store {
					if err := s.Close(); err != nil {
						t.Fatal(err)
					}
					mu.Lock()
					dir := dirs[s]
					mu.Unlock()
					segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
					for _, l := range lost {
						found := false
						for _, seg := range segs {
							b, err := os.ReadFile(seg)
							if err != nil {
								t.Fatal(err)
							}
							if i := bytes.Index(b, l.Entry.JSON); i >= 0 {
								b[i+len(l.Entry.JSON)/2] ^= 0x5a
								if err := os.WriteFile(seg, b, 0o600); err != nil {
									t.Fatal(err)
								}
								found = true
								break
							}
						}
						if !found {
							t.Fatalf("the record of %s is in no segment file", l.Entry.ID)
						}
					}
					return open(t, storetest.Config{}, dir)
				}
			}
			storetest.Run(t, b)
		})
	}
}
