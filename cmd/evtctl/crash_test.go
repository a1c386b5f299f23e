package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/evtctl/evtctl/pkg/cursor"
)

// startServe runs the real binary (this test binary standing in for evtctl) as a child
// process and returns its base URL.
func startServe(t *testing.T, args ...string) (*exec.Cmd, string) {
	t.Helper()
	return startServeEnv(t, nil, args...)
}

// startServeEnv is startServe with env added to the node's environment.
func startServeEnv(t *testing.T, env []string, args ...string) (*exec.Cmd, string) {
	t.Helper()
	addrFile := filepath.Join(t.TempDir(), "addr")
	cmd := exec.Command(os.Args[0], append([]string{"serve", "--listen", "127.0.0.1:0", "--addr-file", addrFile}, args...)...)
	cmd.Env = append(append(os.Environ(), "EVTCTL_TEST_AS_MAIN=1"), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() && stderr.Len() > 0 {
			t.Logf("node %v's stderr:\n%s", args, stderr.String())
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, err := os.ReadFile(addrFile)
		if err == nil && len(bytes.TrimSpace(b)) > 0 {
			return cmd, "http://" + strings.TrimSpace(string(b))
		}
		if time.Now().After(deadline) {
			t.Fatalf("node did not start: %s", stderr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestKill9KeepsAcknowledgedEvents ingests steadily from several clients, kills the node
// with SIGKILL mid-stream, restarts it, and checks that every event that got a 2xx is
// there exactly once, in order, and that new cursors sort after old ones.
func TestKill9KeepsAcknowledgedEvents(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts and kills child processes")
	}
	dir := t.TempDir()
	acked := map[string]string{} // id -> cursor
	var mu sync.Mutex
	var lastBefore cursor.Cursor

	for round := 0; round < 3; round++ {
		cmd, url := startServe(t, "--data-dir", dir)
		var n atomic.Int64
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				client := &http.Client{Timeout: 5 * time.Second}
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					size := 1 + i%10
					var b bytes.Buffer
					ids := make([]string, size)
					b.WriteByte('[')
					for j := range ids {
						ids[j] = fmt.Sprintf("r%d-w%d-%d-%d", round, w, i, j)
						if j > 0 {
							b.WriteByte(',')
						}
						fmt.Fprintf(&b, `{"specversion":"1.0","id":%q,"source":"/crash","type":"org.example.crash.v1","data":{"pad":%q}}`,
							ids[j], strings.Repeat("x", 300))
					}
					b.WriteByte(']')
					resp, err := client.Post(url+"/events", "application/cloudevents-batch+json", &b)
					if err != nil {
						return // the node is gone
					}
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						continue
					}
					res := gjson.GetBytes(body, "results.#.cursor").Array()
					if len(res) != size {
						t.Errorf("reply %s has %d cursors for %d events", body, len(res), size)
						return
					}
					mu.Lock()
					for j, id := range ids {
						acked[id] = res[j].String()
					}
					mu.Unlock()
					n.Add(int64(size))
				}
			}()
		}
		// Let a few thousand events through, then kill the node in the middle of appends.
		deadline := time.Now().Add(20 * time.Second)
		for n.Load() < 3000 && time.Now().Before(deadline) {
			time.Sleep(2 * time.Millisecond)
		}
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		close(stop)
		wg.Wait()
		_ = cmd.Wait()
		if n.Load() == 0 {
			t.Fatal("no event was acknowledged before the kill")
		}
		// Every cursor acknowledged in this round is after everything from earlier rounds.
		mu.Lock()
		for id, c := range acked {
			if strings.HasPrefix(id, fmt.Sprintf("r%d-", round)) && !cursor.MustParse(c).After(lastBefore) {
				t.Errorf("round %d cursor %s is not after %s from before the restart", round, c, lastBefore)
			}
		}
		for _, c := range acked {
			if cc := cursor.MustParse(c); cc.After(lastBefore) {
				lastBefore = cc
			}
		}
		mu.Unlock()
	}

	_, url := startServe(t, "--data-dir", dir)
	seen := map[string]string{}
	var prev cursor.Cursor
	after := ""
	for {
		resp, err := http.Get(url + "/events?order=asc&maxItems=100&after=" + after)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		items := gjson.GetBytes(body, "items").Array()
		for _, it := range items {
			c := cursor.MustParse(it.Get("cursor").String())
			if !c.After(prev) {
				t.Fatalf("cursor %v out of order after %v", c, prev)
			}
			prev = c
			id := it.Get("data.id").String()
			if _, dup := seen[id]; dup {
				t.Fatalf("event %s is in the log twice", id)
			}
			seen[id] = c.String()
		}
		if !gjson.GetBytes(body, "more").Bool() {
			break
		}
		after = items[len(items)-1].Get("cursor").String()
	}
	missing := 0
	for id, c := range acked {
		got, ok := seen[id]
		if !ok {
			missing++
			if missing < 5 {
				t.Errorf("acknowledged event %s (cursor %s) is missing after kill -9", id, c)
			}
			continue
		}
		if got != c {
			t.Errorf("event %s: cursor %s after restart, %s when acknowledged", id, got, c)
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d acknowledged events lost", missing, len(acked))
	}
	t.Logf("%d events acknowledged over 3 kills; %d in the log (the rest were written but never acknowledged)", len(acked), len(seen))
}
