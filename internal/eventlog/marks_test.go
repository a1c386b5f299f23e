package eventlog

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
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

// When making the high-water mark durable fails, the append is refused and its records cut
// back, and the mark goes back to what it was, in the file too: a reopened log reports no
// loss of the events that were never acknowledged. With an I/O error the log stops; with
// a full disk it goes on, and the next append moves the mark again.
func TestHighWaterSyncFailureRestoresTheMark(t *testing.T) {
	for _, tc := range []struct {
		errno syscall.Errno
		as    error
	}{{syscall.EIO, ErrFailed}, {syscall.ENOSPC, ErrUnavailable}} {
		errno := tc.errno
		t.Run(errno.Error(), func(t *testing.T) {
			dir := t.TempDir()
			l := openT(t, Options{Dir: dir})
			cs := appendN(t, l, 0, 20, 5)
			var fails atomic.Int32
			fails.Store(1)
			l.hwm.sync = func(f *os.File) error {
				if fails.Add(-1) >= 0 {
					return errno
				}
				return dataSync(f)
			}
			if _, err := l.Append(ctx, []Entry{ev(20), ev(21), ev(22)}); !errors.Is(err, tc.as) {
				t.Fatalf("an append whose mark did not sync: %v", err)
			}
			if seq, _, _, err := hwmRead(dir); err != nil || seq != 20 {
				t.Fatalf("the mark on disk says %d (%v), want 20", seq, err)
			}
			want := cs
			if errno == syscall.ENOSPC {
				want = append(want, appendN(t, l, 30, 2, 2)...)
				if seq, _, _, err := hwmRead(dir); err != nil || seq != want[len(want)-1].Seq {
					t.Fatalf("after the next append the mark says %d (%v), want %d", seq, err, want[len(want)-1].Seq)
				}
			}
			l.Close()
			l2 := openT(t, Options{Dir: dir})
			if st := l2.Stats(); len(st.Damage) != 0 || st.Newest != want[len(want)-1] {
				t.Fatalf("reopened: damage %v, newest %v; want none, %v", st.Damage, st.Newest, want[len(want)-1])
			}
			l2.Close()
			if r, err := Verify(dir); err != nil || !r.Clean() {
				t.Fatalf("verify: %+v %v", r, err)
			}
		})
	}
}
