package forward

import (
	"bytes"
	"cmp"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestJournalRoundTripAndTornTail(t *testing.T) {
	dir := t.TempDir()
	st, err := OpenState(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Fresh() {
		t.Error("a new directory is not fresh")
	}
	due := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	ev := []byte(`{"specversion":"1.0","id":"a","source":"/s","type":"t"}`)
	must(t, st.append([]*record{
		{Op: opRetry, Cursor: cursorOf(1), Tier: 1, Attempts: 1, Due: due, Status: 503, Reason: "busy", Event: ev},
		{Op: opRetry, Cursor: cursorOf(2), Tier: 1, Attempts: 1, Due: due, Event: ev},
		{Op: opDone, Cursor: cursorOf(3)},
	}, true))
	must(t, st.append([]*record{
		{Op: opRetry, Cursor: cursorOf(1), Tier: 2, Attempts: 2, Due: due.Add(time.Minute), Status: 500},
		{Op: opDone, Cursor: cursorOf(2)},
	}, false))
	st.Close()

	// A crash in the middle of an append leaves a partial line.
	f, err := os.OpenFile(filepath.Join(dir, journalName), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`0badc0de {"op":"done","cur`)
	f.Close()

	st, err = OpenState(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if st.Fresh() || st.Repaired() == 0 {
		t.Errorf("fresh %v, repaired %d", st.Fresh(), st.Repaired())
	}
	live, done := st.entries()
	if len(live) != 1 {
		t.Fatalf("live %v", live)
	}
	e := live[0]
	if e.Cursor != cursorOf(1) || e.Tier != 2 || e.Attempts != 2 || !e.Due.Equal(due.Add(time.Minute)) || e.Status != 500 || !bytes.Equal(e.Event, ev) {
		t.Errorf("entry %+v", e)
	}
	if !done[cursorOf(2)] || !done[cursorOf(3)] || len(done) != 2 {
		t.Errorf("done %v", done)
	}
	// Opening rewrote the journal without the torn line.
	data, _ := os.ReadFile(filepath.Join(dir, journalName))
	if bytes.Contains(data, []byte("0badc0de")) {
		t.Error("the torn line is still there")
	}

	// The checkpoint passing events drops their done records.
	must(t, st.checkpointed(cursorOf(2)))
	if _, done := st.entries(); !done[cursorOf(3)] || done[cursorOf(2)] {
		t.Errorf("after the checkpoint, done %v", done)
	}
}

func TestStateIsLocked(t *testing.T) {
	dir := t.TempDir()
	st, err := OpenState(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := OpenState(dir); !errors.Is(err, ErrLocked) {
		t.Errorf("second OpenState = %v, want ErrLocked", err)
	}
}

func TestJournalCompacts(t *testing.T) {
	dir := t.TempDir()
	st, err := OpenState(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ev := []byte(`{"specversion":"1.0","id":"a","source":"/s","type":"t","data":"` + strings.Repeat("x", 1000) + `"}`)
	for i := 1; i <= 2000; i += 100 {
		var recs []*record
		for j := i; j < i+100; j++ {
			recs = append(recs, &record{Op: opRetry, Cursor: cursorOf(j), Tier: 1, Attempts: 1, Event: ev}, &record{Op: opDone, Cursor: cursorOf(j)})
		}
		must(t, st.append(recs, true))
	}
	if st.size < compactMin {
		t.Fatalf("journal only %d bytes", st.size)
	}
	must(t, st.checkpointed(cursorOf(2000)))
	info, err := os.Stat(filepath.Join(dir, journalName))
	if err != nil {
		t.Fatal(err)
	}
	if info.Size() != int64(len(journalHeader)) {
		t.Errorf("compacted journal has %d bytes, want just the header", info.Size())
	}
	// Appends go on in the new file.
	must(t, st.append([]*record{{Op: opDone, Cursor: cursorOf(2001)}}, true))
	data, _ := os.ReadFile(filepath.Join(dir, journalName))
	if js, valid, err := decodeJournal(data); err != nil || valid != len(data) || !js.done[cursorOf(2001)] {
		t.Errorf("after compaction: %v, %d of %d bytes valid", err, valid, len(data))
	}
}

func TestJournalRejectsForeignFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, journalName), []byte("something else\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenState(dir); err == nil || !strings.Contains(err.Error(), "not a forward journal") {
		t.Errorf("OpenState = %v", err)
	}
}

func TestDeadLetterFileStartsOnAFreshLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dead.jsonl")
	if err := os.WriteFile(path, []byte(`{"torn":`), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := openDeadLetters(path)
	if err != nil {
		t.Fatal(err)
	}
	must(t, d.write([]byte("{\"id\":\"x\"}\n")))
	d.close()
	b, _ := os.ReadFile(path)
	if string(b) != "{\"torn\":\n{\"id\":\"x\"}\n" {
		t.Errorf("file %q", b)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestCheckpointedKeepsLaterOutcomes: outcomes of events after the checkpoint stay in the
// journal, whatever form the log's cursors take. A Redis stream's entry ids order by
// number, ms then seq (1795862194383-10 before 1795862194384-0), which neither text order
// nor length does: dropping the record of …384-0 at a checkpoint at …383-10 would deliver
// that event again after a crash.
func TestCheckpointedKeepsLaterOutcomes(t *testing.T) {
	st, err := OpenState(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// The forwarder orders the journal's cursors as the log does.
	if _, err := New(Options{Target: Target{URL: "http://127.0.0.1:1/"}, State: st, Checkpoint: func(string) error { return nil }, Order: compareIDs}); err != nil {
		t.Fatal(err)
	}
	ids := []string{"1795862194383-9", "1795862194383-10", "1795862194384-0", "1795862194384-1"}
	var recs []*record
	for _, c := range ids {
		recs = append(recs, &record{Op: opDone, Cursor: c})
	}
	must(t, st.append(recs, true))
	must(t, st.checkpointed("1795862194383-10"))
	_, done := st.entries()
	if len(done) != 2 || !done["1795862194384-0"] || !done["1795862194384-1"] {
		t.Fatalf("outcomes kept after the checkpoint: %v", done)
	}
}

// compareIDs orders Redis entry ids: ms, then seq, by number.
func compareIDs(a, b string) int {
	num := func(s string) (uint64, uint64) {
		ms, seq, _ := strings.Cut(s, "-")
		m, _ := strconv.ParseUint(ms, 10, 64)
		q, _ := strconv.ParseUint(seq, 10, 64)
		return m, q
	}
	am, as := num(a)
	bm, bs := num(b)
	return cmp.Or(cmp.Compare(am, bm), cmp.Compare(as, bs))
}
