package cursor

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestCheckpointRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cp.json")
	if _, ok, err := LoadCheckpoint(path); ok || err != nil {
		t.Fatalf("missing file: ok=%v err=%v", ok, err)
	}
	want := Checkpoint{Cursor: "18ea61a27c39abd8-00000000000000c7", Node: "http://127.0.0.1:7480", Query: "type EXISTS", Updated: time.Unix(1, 0).UTC()}
	if err := SaveCheckpoint(path, want); err != nil {
		t.Fatal(err)
	}
	got, ok, err := LoadCheckpoint(path)
	if err != nil || !ok || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v ok=%v err=%v", got, ok, err)
	}
	// Overwrite leaves no temporary files behind.
	want.Cursor = "18ea61a27c39abd8-00000000000000c8"
	if err := SaveCheckpoint(path, want); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("directory holds %d files, want 1", len(entries))
	}
}

func TestCheckpointBareCursorAndErrors(t *testing.T) {
	dir := t.TempDir()
	bare := filepath.Join(dir, "bare")
	os.WriteFile(bare, []byte("18ea61a27c39abd8-00c7\n"), 0o644)
	cp, ok, err := LoadCheckpoint(bare)
	if err != nil || !ok || cp.Cursor != "18ea61a27c39abd8-00c7" {
		t.Fatalf("bare cursor: %+v %v %v", cp, ok, err)
	}
	// Whether a cursor is one of the log's is for its reader to say (the command checks it).
	for name, content := range map[string]string{"junk": "{not json", "number": `{"cursor":5}`} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(content), 0o644)
		if _, _, err := LoadCheckpoint(p); err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: error %v should name the file", name, err)
		}
	}
	if err := SaveCheckpoint(filepath.Join(dir, "no", "such", "dir", "cp"), Checkpoint{}); err == nil {
		t.Error("saving into a missing directory should fail")
	}
}

// A consumer that has read nothing records where it starts: the log's start (no cursor, no
// time) or a time; both come back as they were saved.
func TestCheckpointStartPositions(t *testing.T) {
	dir := t.TempDir()
	since := time.Date(2026, 11, 22, 10, 0, 0, 5, time.UTC)
	for name, want := range map[string]Checkpoint{
		"start": {Node: "http://127.0.0.1:7480", Updated: time.Unix(1, 0).UTC()},
		"since": {Since: since, Updated: time.Unix(1, 0).UTC()},
	} {
		p := filepath.Join(dir, name)
		if err := SaveCheckpoint(p, want); err != nil {
			t.Fatal(err)
		}
		got, ok, err := LoadCheckpoint(p)
		if err != nil || !ok || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: got %+v ok=%v err=%v, want %+v", name, got, ok, err, want)
		}
		if got.AtStart() != (name == "start") {
			t.Errorf("%s: AtStart() = %v", name, got.AtStart())
		}
	}
	b, _ := os.ReadFile(filepath.Join(dir, "start"))
	if !strings.Contains(string(b), `"cursor":""`) || strings.Contains(string(b), "since") {
		t.Errorf("a checkpoint at the log's start is written %s", b)
	}
	// A cursor is the position: a time beside it is not kept.
	p := filepath.Join(dir, "both")
	os.WriteFile(p, []byte(`{"cursor":"18ea61a27c39abd8-00c7","since":"2026-11-22T10:00:00Z"}`), 0o644)
	if cp, _, err := LoadCheckpoint(p); err != nil || !cp.Since.IsZero() || cp.AtStart() {
		t.Errorf("cursor and since: %+v %v", cp, err)
	}
}
