package eventlog

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A HIGHWATER file left empty — created by an earlier version, which was killed before it
// wrote the file on the log's first start — holds no mark: the log opens and verifies
// without it (it could never have held one), and writes it anew.
func TestEmptyHighWaterFileOpens(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, Options{Dir: dir})
	cs := appendN(t, l, 0, 30, 5)
	l.Close()
	if err := os.Truncate(filepath.Join(dir, hwmName), 0); err != nil {
		t.Fatal(err)
	}
	r, err := Verify(dir)
	if err != nil {
		t.Fatalf("verifying a log whose HIGHWATER file is empty: %v", err)
	}
	if !r.Clean() || r.Records != 30 || !strings.Contains(strings.Join(r.Notes, "\n"), "empty") {
		t.Fatalf("verify: %+v", r)
	}
	var logs logBuf
	l2 := openT(t, Options{Dir: dir, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	p, err := l2.Read(ctx, Query{Max: 100, Ascending: true})
	if err != nil || len(p.Items) != 30 || p.Items[29].Cursor != cs[29] || len(l2.Stats().Damage) != 0 {
		t.Fatalf("read %d items (%v), damage %v", len(p.Items), err, l2.Stats().Damage)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), hwmName) {
		t.Fatalf("the empty mark file was not logged: %s", logs.String())
	}
	l2.Close()
	if seq, _, ok, err := hwmRead(dir); err != nil || !ok || seq != 30 {
		t.Fatalf("the mark was not written anew: %d %v %v", seq, ok, err)
	}
}

// A HIGHWATER file neither of whose copies is intact stops the log from opening, with a
// message that names serve --verify; Verify then reads the whole log all the same and says
// what the damaged file stops.
func TestDamagedHighWaterFileIsVerified(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, Options{Dir: dir, SegmentBytes: 4096})
	appendN(t, l, 0, 100, 5)
	l.Close()
	if err := os.WriteFile(filepath.Join(dir, hwmName), []byte(strings.Repeat("x", markFileSize)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Options{Dir: dir}); err == nil || !strings.Contains(err.Error(), "serve --verify") {
		t.Fatalf("opening with a damaged mark: %v", err)
	}
	r, err := Verify(dir)
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	if r.Records != 100 || len(r.Problems) != 1 || !strings.Contains(r.Problems[0], hwmName) || !strings.Contains(r.Problems[0], "will not open") {
		t.Fatalf("verify: %+v", r)
	}
}
