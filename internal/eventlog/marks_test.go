package eventlog

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/evtctl/evtctl/pkg/cursor"
)

// A HIGHWATER file left empty — created by an earlier version, which was killed before it
// wrote the file on the log's first start — holds no mark: the log opens and verifies
// without it (it could never have held one), and writes it anew.
func TestEmptyHighWaterFileOpens(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, Options{Dir: dir})
	cs := appendN(t, l, 0, 30, 5)
	l.Close()
	if err := os.Truncate(filepath.Join(dir, highMark.file), 0); err != nil {
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
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), highMark.file) {
		t.Fatalf("the empty mark file was not logged: %s", logs.String())
	}
	l2.Close()
	if st, err := readMark(dir, highMark); err != nil || !st.known || st.seq != 30 {
		t.Fatalf("the mark was not written anew: %+v %v", st, err)
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
	if err := os.WriteFile(filepath.Join(dir, highMark.file), []byte(strings.Repeat("x", markFileSize)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Options{Dir: dir}); err == nil || !strings.Contains(err.Error(), "serve --verify") {
		t.Fatalf("opening with a damaged mark: %v", err)
	}
	r, err := Verify(dir)
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	if r.Records != 100 || len(r.Problems) != 1 || !strings.Contains(r.Problems[0], highMark.file) || !strings.Contains(r.Problems[0], "will not open") {
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
			if st, err := readMark(dir, highMark); err != nil || st.seq != 20 {
				t.Fatalf("the mark on disk says %d (%v), want 20", st.seq, err)
			}
			want := cs
			if errno == syscall.ENOSPC {
				want = append(want, appendN(t, l, 30, 2, 2)...)
				if st, err := readMark(dir, highMark); err != nil || st.seq != want[len(want)-1].Seq {
					t.Fatalf("after the next append the mark says %d (%v), want %d", st.seq, err, want[len(want)-1].Seq)
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

// Losing the start of the log is a loss like any other, reported for ever: the low-water
// mark says where the log starts. Dropping the start by retention is not.
func TestLostStartIsReported(t *testing.T) {
	t.Run("oldest segment deleted", func(t *testing.T) {
		dir := t.TempDir()
		opts := Options{Dir: dir, SegmentBytes: 8 << 10}
		l := openT(t, opts)
		all := appendN(t, l, 0, 600, 7)
		l.Close()
		segs := segFiles(t, dir)
		fr := framesOf(t, segs[0])
		os.Remove(segs[0])
		os.Remove(idxPath(segs[0]))
		last := fr[len(fr)-1].seq
		if r, err := Verify(dir); err != nil || len(r.Damage) != 1 || r.Damage[0].First != 1 || r.Damage[0].Last != last {
			t.Fatalf("verify: %+v %v; want 1..%d lost", r, err, last)
		}
		for round := range 2 { // and again after a restart
			l := openT(t, opts)
			st := l.Stats()
			if len(st.Damage) != 1 || st.Damage[0].First != 1 || st.Damage[0].Last != last || st.Oldest != all[last] {
				t.Fatalf("damage %+v, oldest %v; want 1..%d lost, oldest %v", st.Damage, st.Oldest, last, all[last])
			}
			appendN(t, l, 1000+10*round, 3, 3)
			l.Close()
		}
	})
	t.Run("every segment deleted", func(t *testing.T) {
		dir := t.TempDir()
		opts := Options{Dir: dir, SegmentBytes: 8 << 10}
		l := openT(t, opts)
		appendN(t, l, 0, 600, 7)
		l.Close()
		for _, pat := range []string{"*.seg", "*.idx"} {
			names, _ := filepath.Glob(filepath.Join(dir, pat))
			for _, n := range names {
				os.Remove(n)
			}
		}
		var fresh []uint64
		for round := range 3 {
			l := openT(t, opts)
			st := l.Stats()
			if len(st.Damage) != 1 || st.Damage[0].First != 1 || st.Damage[0].Last != 600 || st.Items != uint64(len(fresh)) {
				t.Fatalf("round %d: damage %+v, %d items; want 1..600 lost, %d items", round, st.Damage, st.Items, len(fresh))
			}
			for _, c := range appendN(t, l, 1000+10*round, 2, 2) {
				fresh = append(fresh, c.Seq)
			}
			l.Close()
		}
		if fresh[0] != 601 {
			t.Fatalf("the first new event got sequence number %d, want 601", fresh[0])
		}
	})
	t.Run("dropped by retention", func(t *testing.T) {
		dir := t.TempDir()
		opts := Options{Dir: dir, SegmentBytes: 4 << 10, MaxItems: 100}
		l := openT(t, opts)
		all := appendN(t, l, 0, 600, 7)
		waitFor(t, func() bool {
			// The first file holds a retained record: every older one is deleted.
			names, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
			sort.Strings(names)
			b, err := os.ReadFile(names[0])
			if err != nil || len(names) < 2 {
				return false
			}
			base, _ := baseFromName(names[1])
			return len(b) > segHeaderSize && base > 501
		}, "old segments deleted")
		l.Close()
		for range 2 {
			l := openT(t, opts)
			if st := l.Stats(); len(st.Damage) != 0 || st.Oldest != all[500] || st.Items != 100 {
				t.Fatalf("after retention and a restart: damage %+v, oldest %v, %d items; want none, %v, 100", st.Damage, st.Oldest, st.Items, all[500])
			}
			l.Close()
		}
		if r, err := Verify(dir); err != nil || !r.Clean() {
			t.Fatalf("verify: %+v %v", r, err)
		}
		// What retention kept is the log's start: losing the oldest file left is a loss.
		segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
		sort.Strings(segs)
		fr := framesOf(t, segs[0])
		os.Remove(segs[0])
		os.Remove(idxPath(segs[0]))
		l = openT(t, Options{Dir: dir, SegmentBytes: 4 << 10})
		if st := l.Stats(); len(st.Damage) != 1 || st.Damage[0].Last != fr[len(fr)-1].seq || st.Damage[0].First > 501 {
			t.Fatalf("the oldest retained file deleted: damage %+v, want up to %d", st.Damage, fr[len(fr)-1].seq)
		}
	})
}

// A log written before the low-water mark existed opens as it did: it is taken to start at
// its oldest segment file, and the mark is written from then on.
func TestLogWithoutLowWaterMarkOpens(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Dir: dir, SegmentBytes: 8 << 10}
	l := openT(t, opts)
	all := appendN(t, l, 0, 600, 7)
	l.Close()
	segs := segFiles(t, dir)
	fr := framesOf(t, segs[0])
	os.Remove(segs[0])
	os.Remove(idxPath(segs[0]))
	os.Remove(filepath.Join(dir, lowMark.file))
	if r, err := Verify(dir); err != nil || !r.Clean() || !strings.Contains(strings.Join(r.Notes, "\n"), "no low-water mark file") {
		t.Fatalf("verify: %+v %v", r, err)
	}
	l = openT(t, opts)
	first := fr[len(fr)-1].seq + 1
	if st := l.Stats(); len(st.Damage) != 0 || st.Oldest != all[first-1] {
		t.Fatalf("damage %+v, oldest %v; want none, %v", st.Damage, st.Oldest, all[first-1])
	}
	l.Close()
	if st, err := readMark(dir, lowMark); err != nil || !st.known || st.seq != first {
		t.Fatalf("the low-water mark: %+v %v; want %d", st, err, first)
	}
}

// Retention moves the low-water mark, durably, before it deletes a file: while the mark
// cannot move, no file goes; and files a crash left below the mark are set aside on open
// (their records are not served again) and deleted.
func TestLowWaterMarkMovesBeforeFilesGo(t *testing.T) {
	dir := t.TempDir()
	var logs logBuf
	l := openT(t, Options{Dir: dir, SegmentBytes: 4 << 10, MaxItems: 50, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	var failing atomic.Bool
	failing.Store(true)
	l.lwm.sync = func(f *os.File) error {
		if failing.Load() {
			return syscall.EIO
		}
		return dataSync(f)
	}
	appendN(t, l, 0, 300, 5)
	waitFor(t, func() bool { return strings.Contains(logs.String(), "low-water mark cannot be moved") }, "a failed move logged")
	oldest := filepath.Join(dir, fmt.Sprintf("%020d.seg", 1))
	if _, err := os.Stat(oldest); err != nil {
		t.Fatalf("a file was deleted while the low-water mark could not move: %v", err)
	}
	// Read once the log is closed: while it runs, the pruner tries again and the mark on
	// disk holds a new value for the moment between a write and its undoing.
	l.Close()
	if st, err := readMark(dir, lowMark); err != nil || st.seq != 1 {
		t.Fatalf("the low-water mark on disk: %+v %v; want 1", st, err)
	}
	if _, err := os.Stat(oldest); err != nil {
		t.Fatalf("a file was deleted while the low-water mark could not move: %v", err)
	}
	l = openT(t, Options{Dir: dir, SegmentBytes: 4 << 10, MaxItems: 50})
	waitFor(t, func() bool { _, err := os.Stat(oldest); return err != nil }, "old files deleted")
	l.Close()
	lw, err := readMark(dir, lowMark)
	if err != nil || lw.seq <= 1 {
		t.Fatalf("the low-water mark after retention: %+v %v", lw, err)
	}
	l = openT(t, Options{Dir: dir, SegmentBytes: 4 << 10})
	if st := l.Stats(); len(st.Damage) != 0 || st.Oldest.Seq != lw.seq || st.Items != 300-lw.seq+1 {
		t.Fatalf("reopened: damage %+v, oldest %v, %d items; want none, from %d", st.Damage, st.Oldest, st.Items, lw.seq)
	}
	l.Close()

	// A crash after the mark moved and before the files went: they are set aside, then deleted.
	dir = t.TempDir()
	l = openT(t, Options{Dir: dir, SegmentBytes: 4 << 10})
	appendN(t, l, 0, 300, 5)
	l.Close()
	m, err := openMark(dir, lowMark, 150, 0)
	if err != nil {
		t.Fatal(err)
	}
	m.close()
	l = openT(t, Options{Dir: dir, SegmentBytes: 4 << 10})
	p, err := l.Read(ctx, Query{Max: 1000, Ascending: true})
	if err != nil || len(p.Items) != 151 || p.Items[0].Cursor.Seq != 150 || p.Oldest.Seq != 150 || len(l.Stats().Damage) != 0 {
		t.Fatalf("files below the mark: %d items from %v (%v), oldest %v, damage %v", len(p.Items), first(p.Items), err, p.Oldest, l.Stats().Damage)
	}
	waitFor(t, func() bool {
		names, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
		sort.Strings(names)
		base, _ := baseFromName(names[1])
		return base > 150
	}, "the files below the mark deleted")
}

func first(items []Item) cursor.Cursor {
	if len(items) == 0 {
		return cursor.Cursor{}
	}
	return items[0].Cursor
}

// A reader from the start of a log whose start is lost is told: the first forward read stops
// before the lost range with a position to resume from, and the read from there says where
// the log starts now (Oldest), which does not follow it — cursor.Lost — as for a loss
// anywhere else.
func TestLostStartIsToldToReadersFromTheStart(t *testing.T) {
	for _, tc := range []struct {
		name string
		// damage changes the closed log and returns the first sequence number left.
		damage func(t *testing.T, dir string) uint64
	}{
		{"first record damaged", func(t *testing.T, dir string) uint64 {
			flipIn(t, segFiles(t, dir)[0], 0)
			return 2
		}},
		{"oldest segment deleted", func(t *testing.T, dir string) uint64 {
			seg := segFiles(t, dir)[0]
			fr := framesOf(t, seg)
			os.Remove(seg)
			os.Remove(idxPath(seg))
			return fr[len(fr)-1].seq + 1
		}},
		{"every segment deleted", func(t *testing.T, dir string) uint64 {
			for _, seg := range segFiles(t, dir) {
				os.Remove(seg)
				os.Remove(idxPath(seg))
			}
			return 0
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := Options{Dir: dir, SegmentBytes: 8 << 10}
			l := openT(t, opts)
			all := appendN(t, l, 0, 300, 5)
			l.Close()
			left := tc.damage(t, dir)
			l = openT(t, opts)
			waitChecked(t, l)
			p, err := l.Read(ctx, Query{Max: 10, Ascending: true})
			if err != nil {
				t.Fatal(err)
			}
			resume := p.Resume
			if len(p.Items) != 0 || !p.More || !p.AtLoss || resume.IsZero() || resume.Seq != 0 || left > 0 && !resume.Before(all[left-1]) {
				t.Fatalf("from the start: %d items, more %v, at loss %v, resume %v; want none, a stop before sequence number 1", len(p.Items), p.More, p.AtLoss, resume)
			}
			p, err = l.Read(ctx, Query{After: resume, Max: 10, Ascending: true})
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case left == 0:
				// Nothing is left: the log reads as emptied, its newest past the resume position.
				if len(p.Items) != 0 || !p.Oldest.IsZero() || p.Newest != all[299] {
					t.Fatalf("after %v: %d items, oldest %v, newest %v", resume, len(p.Items), p.Oldest, p.Newest)
				}
			default:
				if len(p.Items) != 10 || p.Items[0].Cursor != all[left-1] || p.Oldest != all[left-1] || !cursor.Lost(resume.String(), p.Oldest.String()) {
					t.Fatalf("after %v: %d items from %v, oldest %v; want from %v, told of the loss", resume, len(p.Items), first(p.Items), p.Oldest, all[left-1])
				}
			}
			// A reader with a position is not stopped there again; newest first reads are as
			// they were.
			p, err = l.Read(ctx, Query{Max: 10})
			if err != nil || len(p.Items) == 0 && left > 0 {
				t.Fatalf("newest first: %d items (%v)", len(p.Items), err)
			}
		})
	}
}

// The time window drops a range lost to damage only once the record after it expires: the
// lost records' times are not known, only that they are not later than that record's. (Else
// a lost start is forgotten as soon as the log is opened, and a lost range in the middle as
// soon as the record before it expires, while its events would still be kept.)
func TestWindowKeepsLostRangesItCannotDate(t *testing.T) {
	var clk clock
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk.ns.Store(t0.UnixNano())
	dir := t.TempDir()
	opts := Options{Dir: dir, SegmentBytes: 4 << 10, Window: 2 * time.Minute, Now: clk.now}
	l := openT(t, opts)
	appendN(t, l, 0, 100, 5)
	clk.add(60 * time.Second)
	appendN(t, l, 100, 100, 5)
	l.Close()
	// The oldest file, and the first file of the later events.
	segs := segFiles(t, dir)
	var later string
	for _, seg := range segs {
		if fr := framesOf(t, seg); fr[0].seq > 100 {
			later = seg
			break
		}
	}
	lost := func(seg string) (uint64, uint64) {
		fr := framesOf(t, seg)
		os.Remove(seg)
		os.Remove(idxPath(seg))
		return fr[0].seq, fr[len(fr)-1].seq
	}
	_, l1 := lost(segs[0])
	f2, l2 := lost(later)

	clk.add(10 * time.Second) // nothing has expired
	l = openT(t, opts)
	if st := l.Stats(); len(st.Damage) != 2 || st.Damage[0].First != 1 || st.Damage[1].First != f2 {
		t.Fatalf("nothing expired: damage %+v, want 1..%d and %d..%d", st.Damage, l1, f2, l2)
	}
	clk.add(60 * time.Second) // the first 100 events expired; the later ones not
	if err := l.applyWindow(); err != nil {
		t.Fatal(err)
	}
	if st := l.Stats(); len(st.Damage) != 1 || st.Damage[0].First != f2 {
		t.Fatalf("the earlier events expired: damage %+v, want %d..%d", st.Damage, f2, l2)
	}
	clk.add(time.Hour) // everything expired
	if err := l.applyWindow(); err != nil {
		t.Fatal(err)
	}
	if st := l.Stats(); len(st.Damage) != 0 || st.Items != 0 {
		t.Fatalf("everything expired: damage %+v, %d items", st.Damage, st.Items)
	}
}
