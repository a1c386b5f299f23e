package main

// The fault-injection suite: a node (the real binary, in a child process) writes a log of
// several segment files; while it is stopped, the files are damaged the ways disks and
// people damage them; the node is started again, and what a client sees is checked.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/tidwall/gjson"

	"github.com/evtctl/evtctl/internal/testwait"
	"github.com/evtctl/evtctl/pkg/cursor"
)

func init() { scriptCmds["damage"] = cmdDamage }

// cmdDamage copies a stopped node's data directory and damages the copy: the first record
// flipped, the oldest segment file deleted, or every segment file deleted.
//
//	damage first-record|oldest-segment|every-segment DIR COPY
func cmdDamage(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: damage first-record|oldest-segment|every-segment DIR COPY")
	}
	src, dst := ts.MkAbs(args[1]), ts.MkAbs(args[2])
	ts.Check(os.MkdirAll(dst, 0o700))
	entries, err := os.ReadDir(src)
	ts.Check(err)
	for _, e := range entries {
		if e.Name() == "LOCK" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		ts.Check(err)
		ts.Check(os.WriteFile(filepath.Join(dst, e.Name()), b, 0o600))
	}
	segs, _ := filepath.Glob(filepath.Join(dst, "*.seg"))
	slices.Sort(segs)
	if len(segs) < 2 {
		ts.Fatalf("damage: want a log of at least 2 segment files, got %d", len(segs))
	}
	remove := func(seg string) {
		ts.Check(os.Remove(seg))
		_ = os.Remove(strings.TrimSuffix(seg, ".seg") + ".idx")
	}
	switch args[0] {
	case "first-record":
		b, err := os.ReadFile(segs[0])
		ts.Check(err)
		i := bytes.Index(b, []byte(`"specversion"`)) // in the first record's event
		if i < 0 {
			ts.Fatalf("damage: no event in %s", segs[0])
		}
		b[i+3] ^= 0x21
		ts.Check(os.WriteFile(segs[0], b, 0o600))
	case "oldest-segment":
		remove(segs[0])
	case "every-segment":
		for _, seg := range segs {
			remove(seg)
		}
	default:
		ts.Fatalf("damage: unknown damage %q", args[0])
	}
}

// loggedEvent is one event ingested, with the cursor the node acknowledged it with.
type loggedEvent struct {
	id     string
	cursor cursor.Cursor
}

// ingestEvents sends n events in batches and returns them in log order.
func ingestEvents(t *testing.T, url string, from, n, batch int) []loggedEvent {
	t.Helper()
	var out []loggedEvent
	for i := from; i < from+n; i += batch {
		var b bytes.Buffer
		var ids []string
		b.WriteByte('[')
		for j := i; j < min(i+batch, from+n); j++ {
			if j > i {
				b.WriteByte(',')
			}
			id := fmt.Sprintf("damage-%06d", j)
			ids = append(ids, id)
			fmt.Fprintf(&b, `{"specversion":"1.0","id":%q,"source":"/damage","type":"org.example.disk.written.v1","data":{"n":%d,"pad":%q}}`, id, j, strings.Repeat("x", 200))
		}
		b.WriteByte(']')
		resp, err := http.Post(url+"/events", "application/cloudevents-batch+json", &b)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("ingest: %d %s", resp.StatusCode, body)
		}
		for k, r := range gjson.GetBytes(body, "results").Array() {
			c, err := cursor.Parse(r.Get("cursor").String())
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, loggedEvent{ids[k], c})
		}
	}
	return out
}

// stopServe stops a node with SIGTERM and waits for it.
func stopServe(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-testwait.Expired(t):
		t.Fatal("the node did not stop")
	}
}

// segmentsOf lists a data directory's segment files in order.
func segmentsOf(t *testing.T, dir string) []string {
	names, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	slices.Sort(names)
	if len(names) < 4 {
		t.Fatalf("want a log of at least 4 segment files, got %d", len(names))
	}
	return names
}

// idsIn returns the ids of the events whose JSON lies in b (a file's bytes, or part of one).
func idsIn(b []byte) []string {
	var ids []string
	for rest := b; ; {
		i := bytes.Index(rest, []byte(`"id":"damage-`))
		if i < 0 {
			return ids
		}
		rest = rest[i+6:]
		ids = append(ids, string(rest[:13]))
	}
}

// offsetOf finds where the event with id is stored in a file.
func offsetOf(t *testing.T, b []byte, id string) int {
	i := bytes.Index(b, []byte(`"id":"`+id+`"`))
	if i < 0 {
		t.Fatalf("event %s is not in the file", id)
	}
	return i + 6
}

type fault struct {
	name string
	// apply damages the stopped node's directory and returns the ids of the events lost.
	apply func(t *testing.T, dir string, segs []string) []string
}

func flipEvent(t *testing.T, path string, which func(ids []string) string) []string {
	b, _ := os.ReadFile(path)
	id := which(idsIn(b))
	b[offsetOf(t, b, id)+3] ^= 0x21 // inside the event's id: its record no longer checks
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{id}
}

func middle(ids []string) string { return ids[len(ids)/2] }

var faults = []fault{
	{"a flipped byte in the middle of the active segment", func(t *testing.T, dir string, segs []string) []string {
		return flipEvent(t, segs[len(segs)-1], middle)
	}},
	{"a flipped byte in a sealed segment with its index", func(t *testing.T, dir string, segs []string) []string {
		return flipEvent(t, segs[1], middle)
	}},
	{"a flipped byte in a sealed segment without its index", func(t *testing.T, dir string, segs []string) []string {
		os.Remove(strings.TrimSuffix(segs[1], ".seg") + ".idx")
		return flipEvent(t, segs[1], middle)
	}},
	{"a middle segment deleted", func(t *testing.T, dir string, segs []string) []string {
		b, _ := os.ReadFile(segs[2])
		os.Remove(segs[2])
		os.Remove(strings.TrimSuffix(segs[2], ".seg") + ".idx")
		return idsIn(b)
	}},
	{"the last segment deleted", func(t *testing.T, dir string, segs []string) []string {
		b, _ := os.ReadFile(segs[len(segs)-1])
		os.Remove(segs[len(segs)-1])
		return idsIn(b)
	}},
	{"a sealed segment cut short", func(t *testing.T, dir string, segs []string) []string {
		b, _ := os.ReadFile(segs[1])
		ids := idsIn(b)
		cut := offsetOf(t, b, middle(ids))
		os.Truncate(segs[1], int64(cut))
		return ids[len(ids)/2:]
	}},
	{"the tail of the active segment zeroed", func(t *testing.T, dir string, segs []string) []string {
		path := segs[len(segs)-1]
		b, _ := os.ReadFile(path)
		ids := idsIn(b)
		from := offsetOf(t, b, ids[len(ids)-4]) // inside the fourth-last record
		clear(b[from:])
		os.WriteFile(path, b, 0o600)
		return ids[len(ids)-4:]
	}},
}

// TestDamagedLogIsFenced: for each kind of damage, the restarted node serves every intact
// event, a tail is told of exactly the lost range, /healthz says degraded and names it,
// /metrics counts it, new cursors come after every old one, and serve --verify reports it.
func TestDamagedLogIsFenced(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts child processes")
	}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cmd, url := startServe(t, "--data-dir", dir, "--segment-size", "64KiB")
			all := ingestEvents(t, url, 0, 1500, 50)
			stopServe(t, cmd)

			lostIDs := f.apply(t, dir, segmentsOf(t, dir))
			lost := map[string]bool{}
			for _, id := range lostIDs {
				lost[id] = true
			}
			var intact []loggedEvent
			first, last := -1, -1
			for i, e := range all {
				if lost[e.id] {
					if first < 0 {
						first = i
					}
					last = i
				} else {
					intact = append(intact, e)
				}
			}
			if first < 0 || last-first+1 != len(lostIDs) {
				t.Fatalf("the damage should lose one run of events, lost %v", lostIDs)
			}

			// serve --verify, on the stopped node, finds exactly that range and changes nothing.
			code, stdout, stderr := runCLI(t, "serve", "--verify", "--data-dir", dir)
			if code != exitLost || !strings.Contains(stdout, fmt.Sprintf("sequence numbers %d to %d", all[first].cursor.Seq, all[last].cursor.Seq)) {
				t.Fatalf("serve --verify: exit %d\n%s%s", code, stdout, stderr)
			}

			cmd, url = startServe(t, "--data-dir", dir, "--segment-size", "64KiB")
			defer stopServe(t, cmd)
			health := getJSON(t, url+"/healthz")
			for i := 0; health.Get("checked").Bool() == false && i < 200; i++ {
				time.Sleep(20 * time.Millisecond)
				health = getJSON(t, url+"/healthz")
			}
			// Every intact event is readable, in order, once; the tail says what was lost.
			code, stdout, stderr = runCLI(t, "tail", "--node", url, "--from-start", "--until-caught-up", "-o", "jsonl")
			if code != 0 {
				t.Fatalf("tail: exit %d: %s", code, stderr)
			}
			var got []string
			for line := range strings.Lines(stdout) {
				got = append(got, gjson.Get(line, "data.id").String())
			}
			var want []string
			for _, e := range intact {
				want = append(want, e.id)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("tail wrote %d events, want the %d intact ones", len(got), len(want))
			}
			after := "cursor " + all[first-1].cursor.String()
			if !strings.Contains(stderr, "events were lost: the node no longer holds events after "+after) {
				t.Fatalf("tail did not report the loss after %s: %s", after, stderr)
			}
			if last+1 < len(all) && !strings.Contains(stderr, "its log now starts at "+all[last+1].cursor.String()) {
				t.Fatalf("tail did not report the loss up to %s: %s", all[last+1].cursor, stderr)
			}
			if strings.Count(stderr, "events were lost") != 1 {
				t.Fatalf("the loss was reported %d times: %s", strings.Count(stderr, "events were lost"), stderr)
			}
			// replay reads the same and says what was lost, once, without taking the node's stop
			// at the damage for a failure to retry.
			code, stdout, stderr = runCLI(t, "replay", "--node", url, "-o", "jsonl")
			got = got[:0]
			for line := range strings.Lines(stdout) {
				got = append(got, gjson.Get(line, "data.id").String())
			}
			if code != 0 || !slices.Equal(got, want) {
				t.Fatalf("replay: exit %d, %d events, want the %d intact ones: %s", code, len(got), len(want), stderr)
			}
			if strings.Contains(stderr, "retrying") || strings.Count(stderr, "events were lost") != 1 {
				t.Fatalf("replay's report of the loss: %s", stderr)
			}
			// A reader resuming from before the damage with --on-gap fail stops there.
			cp := filepath.Join(t.TempDir(), "cp.json")
			os.WriteFile(cp, []byte(all[first-1].cursor.String()+"\n"), 0o600)
			if code, stdout, _ := runCLI(t, "tail", "--node", url, "--checkpoint", cp, "--on-gap", "fail", "--until-caught-up", "-o", "jsonl"); code != exitLost || stdout != "" {
				t.Fatalf("tail --on-gap fail from before the damage: exit %d, wrote %q", code, stdout)
			}
			// /healthz is degraded and names the range; /metrics counts it.
			if health.Get("status").String() != "degraded" || health.Get("damaged.#").Int() != 1 ||
				health.Get("damaged.0.first_seq").Uint() != all[first].cursor.Seq || health.Get("damaged.0.last_seq").Uint() != all[last].cursor.Seq ||
				health.Get("lost_events").Int() != int64(len(lostIDs)) {
				t.Fatalf("healthz: %s", health.Raw)
			}
			if m := getText(t, url+"/metrics"); !strings.Contains(m, fmt.Sprintf("evtctl_log_lost_events %d\n", len(lostIDs))) || !strings.Contains(m, "evtctl_log_damaged_ranges 1\n") {
				t.Fatalf("metrics do not count the loss")
			}
			// New events get cursors after every old one, lost ones included.
			more := ingestEvents(t, url, 5000, 5, 5)
			if !more[0].cursor.After(all[len(all)-1].cursor) || more[0].cursor.Seq <= all[len(all)-1].cursor.Seq {
				t.Fatalf("new cursor %v is not after the old %v", more[0].cursor, all[len(all)-1].cursor)
			}
		})
	}
}

func getJSON(t *testing.T, url string) gjson.Result {
	t.Helper()
	b := getText(t, url)
	if !json.Valid([]byte(b)) {
		t.Fatalf("%s: not JSON: %s", url, b)
	}
	return gjson.Parse(b)
}

func getText(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestLogThatWentBack: a node loses its last segment and its high-water mark, so it numbers
// new events again from below a reader's checkpoint. The checkpointed tail is told the
// cursor is not of the log as it is now (or the log went back), exits 4 with --on-gap fail
// and leaves the checkpoint alone, and never passes over it silently.
func TestLogThatWentBack(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts child processes")
	}
	dir := t.TempDir()
	cmd, url := startServe(t, "--data-dir", dir, "--segment-size", "64KiB")
	all := ingestEvents(t, url, 0, 1500, 50)
	cp := filepath.Join(t.TempDir(), "cp.json")
	if code, _, stderr := runCLI(t, "tail", "--node", url, "--from-start", "--until-caught-up", "--checkpoint", cp, "-o", "jsonl"); code != 0 {
		t.Fatalf("tail: exit %d: %s", code, stderr)
	}
	stopServe(t, cmd)
	segs := segmentsOf(t, dir)
	b, _ := os.ReadFile(segs[len(segs)-1])
	gone := len(idsIn(b))
	os.Remove(segs[len(segs)-1])
	os.Remove(filepath.Join(dir, "HIGHWATER"))
	kept, _ := os.ReadFile(cp)

	cmd, url = startServe(t, "--data-dir", dir, "--segment-size", "64KiB")
	defer stopServe(t, cmd)
	last := all[len(all)-1].cursor.String()
	newest := all[len(all)-1-gone].cursor.String()
	failing := func(what, want string) {
		t.Helper()
		code, stdout, stderr := runCLI(t, "tail", "--node", url, "--checkpoint", cp, "--on-gap", "fail", "--until-caught-up", "-o", "jsonl")
		if code != exitNotOfLog || stdout != "" || !strings.Contains(stderr, "cursor "+last+" is not of this node's log, or the log went back: "+want) {
			t.Fatalf("%s: tail --on-gap fail: exit %d, wrote %q: %s", what, code, stdout, stderr)
		}
		if now, _ := os.ReadFile(cp); !bytes.Equal(now, kept) {
			t.Fatalf("%s: the checkpoint changed: %s", what, now)
		}
	}
	// The node's newest event now comes before the checkpoint's cursor.
	failing("before new events", "its newest event, "+newest+", comes before the cursor")
	// New events are numbered again from after the newest event kept: later than the
	// checkpoint's cursor, numbered below it.
	again := ingestEvents(t, url, 9000, 5, 5)
	if again[0].cursor.Seq > all[len(all)-1].cursor.Seq {
		t.Fatalf("the node numbered its new events from %d, after the lost ones: no test", again[0].cursor.Seq)
	}
	failing("after new events", "its newest event, "+again[4].cursor.String()+", is later than the cursor but numbered below it")
	// warn: said, then the new events, once; the checkpoint moves on to them.
	code, stdout, stderr := runCLI(t, "tail", "--node", url, "--checkpoint", cp, "--until-caught-up", "-o", "jsonl")
	if code != 0 || strings.Count(stderr, "warning: cursor "+last+" is not of this node's log") != 1 || strings.Count(stdout, "\n") != 5 || !strings.Contains(stdout, again[0].id) {
		t.Fatalf("tail --on-gap warn: exit %d, wrote %q: %s", code, stdout, stderr)
	}
	if code, stdout, stderr := runCLI(t, "tail", "--node", url, "--checkpoint", cp, "--on-gap", "fail", "--until-caught-up", "-o", "jsonl"); code != 0 || stdout != "" || stderr != "" {
		t.Fatalf("tail from the moved checkpoint: exit %d, wrote %q: %s", code, stdout, stderr)
	}
}
