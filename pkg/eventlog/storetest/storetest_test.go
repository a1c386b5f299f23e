package storetest_test

import (
	"sync"
	"testing"

	"github.com/evtctl/evtctl/pkg/eventlog"
	"github.com/evtctl/evtctl/pkg/eventlog/storetest"
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
			}
			storetest.Run(t, b)
		})
	}
}
