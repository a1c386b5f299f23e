package forward

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/evtctl/evtctl/internal/atomicfile"
	"github.com/evtctl/evtctl/internal/deliver"
)

// BenchmarkForward forwards b.N events to a loopback receiver that always answers 204, over
// real sockets, and reports events/s. "memory" keeps no state; the others keep the journal,
// the checkpoint and the dead-letter file, fsyncing the journal for every outcome
// (sync=always) or before each checkpoint (sync=checkpoint).
func BenchmarkForward(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	for _, mode := range []string{"memory", "sync=always", "sync=checkpoint"} {
		for _, conc := range []int{1, 16} {
			durable := mode != "memory"
			b.Run(mode+"/concurrency="+strconv.Itoa(conc), func(b *testing.B) {
				events := make([]Event, b.N)
				for i := range events {
					events[i] = eventOf(i + 1)
				}
				opts := Options{
					Target:      Target{URL: srv.URL + "/hook", Mode: deliver.Binary},
					Concurrency: conc,
				}
				if durable {
					dir := b.TempDir()
					st, err := OpenState(filepath.Join(dir, "state"))
					if err != nil {
						b.Fatal(err)
					}
					defer st.Close()
					opts.State = st
					if mode == "sync=checkpoint" {
						opts.Sync = SyncCheckpoint
					}
					opts.DeadLetter = filepath.Join(dir, "dead.jsonl")
					cp := filepath.Join(dir, "checkpoint")
					opts.Checkpoint = func(c string) error { return atomicfile.Write(cp, []byte(c)) }
				}
				f, err := New(opts)
				if err != nil {
					b.Fatal(err)
				}
				src := make(chan Event, 1024)
				go func() {
					for _, ev := range events {
						src <- ev
					}
					close(src)
				}()
				b.ResetTimer()
				if err := f.Run(b.Context(), src); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
			})
		}
	}
}
