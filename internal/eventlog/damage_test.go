package eventlog

import (
	"bytes"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/evtctl/evtctl/pkg/cursor"
)

// frameSeqs maps each record of a segment file to its sequence number and byte range.
type frameSpan struct {
	seq        uint64
	start, end int64
}

func framesOf(t *testing.T, path string) []frameSpan {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []frameSpan
	off := int64(segHeaderSize)
	for off < int64(len(b)) {
		r, err := decodeFrame(b[off:])
		if err != nil {
			t.Fatalf("%s at %d: %v", path, off, err)
		}
		out = append(out, frameSpan{r.seq, off, off + int64(r.size)})
		off += int64(r.size)
	}
	return out
}

// damageCase builds a log of several segments, damages it while it is closed, and reopens it.
type damageCase struct {
	name string
	// damage changes the closed log's directory and returns the sequence numbers lost.
	damage func(t *testing.T, dir string, segs []string) (first, last uint64)
}

func segFiles(t *testing.T, dir string) []string {
	names, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	slices.Sort(names)
	if len(names) < 4 {
		t.Fatalf("want at least 4 segments, got %d", len(names))
	}
	return names
}

func flipIn(t *testing.T, path string, frame int) (uint64, uint64) {
	fr := framesOf(t, path)
	f := fr[frame]
	b, _ := os.ReadFile(path)
	b[(f.start+f.end)/2] ^= 0x5a
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return f.seq, f.seq
}

var damageCases = []damageCase{
	{"flipped byte in the middle of the active segment", func(t *testing.T, dir string, segs []string) (uint64, uint64) {
		last := segs[len(segs)-1]
		return flipIn(t, last, len(framesOf(t, last))/2)
	}},
	{"flipped byte in a sealed segment, with its index", func(t *testing.T, dir string, segs []string) (uint64, uint64) {
		return flipIn(t, segs[1], 7)
	}},
	{"flipped byte in a sealed segment, without its index", func(t *testing.T, dir string, segs []string) (uint64, uint64) {
		os.Remove(idxPath(segs[1]))
		return flipIn(t, segs[1], 7)
	}},
	{"flipped byte in the newest sealed segment, inside the dedupe window", func(t *testing.T, dir string, segs []string) (uint64, uint64) {
		return flipIn(t, segs[len(segs)-2], 3)
	}},
	{"middle segment deleted", func(t *testing.T, dir string, segs []string) (uint64, uint64) {
		fr := framesOf(t, segs[2])
		os.Remove(segs[2])
		os.Remove(idxPath(segs[2]))
		return fr[0].seq, fr[len(fr)-1].seq
	}},
	{"last segment deleted", func(t *testing.T, dir string, segs []string) (uint64, uint64) {
		last := segs[len(segs)-1]
		fr := framesOf(t, last)
		os.Remove(last)
		return fr[0].seq, fr[len(fr)-1].seq
	}},
	{"sealed segment cut short", func(t *testing.T, dir string, segs []string) (uint64, uint64) {
		fr := framesOf(t, segs[1])
		k := len(fr) / 2
		os.Truncate(segs[1], fr[k].start+5)
		return fr[k].seq, fr[len(fr)-1].seq
	}},
	{"tail of the active segment zeroed", func(t *testing.T, dir string, segs []string) (uint64, uint64) {
		last := segs[len(segs)-1]
		fr := framesOf(t, last)
		k := len(fr) - 5
		b, _ := os.ReadFile(last)
		clear(b[fr[k].start:])
		os.WriteFile(last, b, 0o600)
		return fr[k].seq, fr[len(fr)-1].seq
	}},
}

func TestDamageIsFencedNotRepaired(t *testing.T) {
	for _, tc := range damageCases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := Options{Dir: dir, SegmentBytes: 8 << 10}
			l := openT(t, opts)
			all := appendN(t, l, 0, 600, 7)
			l.Close()
			first, last := tc.damage(t, dir, segFiles(t, dir))
			before := snapshotDir(t, dir)

			var logs logBuf
			opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			l2 := openT(t, opts)
			waitChecked(t, l2)
			// Reading around the damage may fence more (a trusted segment): read first.
			got := readAllAround(t, l2)

			// Every intact record is readable, in order, once.
			var want []cursor.Cursor
			for _, c := range all {
				if c.Seq < first || c.Seq > last {
					want = append(want, c)
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("read %d records, want the %d intact ones (lost %d..%d)", len(got), len(want), first, last)
			}
			st := l2.Stats()
			if len(st.Damage) != 1 || st.Damage[0].First != first || st.Damage[0].Last != last || st.Lost != last-first+1 {
				t.Fatalf("damage %+v, want %d..%d", st.Damage, first, last)
			}
			if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "first_seq="+itoa(first)) {
				t.Fatalf("the damage was not logged as an error: %s", logs.String())
			}
			// A newest-first read from the head starts at the newest intact record, also when
			// the damage took the newest ones: the log is not read as empty.
			p, err := l2.Read(ctx, Query{Max: 5})
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Items) != 5 || p.Items[0].Cursor != want[len(want)-1] || p.Oldest.IsZero() {
				t.Fatalf("newest first: %d items, first %v, oldest %v; want 5 from %v", len(p.Items), p.Items, p.Oldest, want[len(want)-1])
			}
			// A reader whose next record is lost is told: the log starts after the damage.
			after := cursorOfSeq(all, first-1)
			p, err = l2.Read(ctx, Query{After: after, Max: 5, Ascending: true})
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case last == all[len(all)-1].Seq:
				// Nothing after the damage yet: the log reads as emptied, its newest past it.
				if !p.Oldest.IsZero() || len(p.Items) != 0 || p.Newest.Seq != last {
					t.Fatalf("after %v: oldest %v newest %v, %d items", after, p.Oldest, p.Newest, len(p.Items))
				}
			default:
				next := cursorOfSeq(all, last+1)
				if p.Oldest != next || len(p.Items) == 0 || p.Items[0].Cursor != next {
					t.Fatalf("after %v: oldest %v, first item %v; want %v", after, p.Oldest, p.Items, next)
				}
			}
			// A forward page from before the damage stops short of it, saying where to resume.
			if first > all[0].Seq+3 {
				p, err := l2.Read(ctx, Query{After: cursorOfSeq(all, first-3), Max: 100, Ascending: true})
				if err != nil {
					t.Fatal(err)
				}
				if len(p.Items) != 2 || !p.More || p.Resume != after || !p.AtLoss {
					t.Fatalf("page before the damage: %d items, more %v, resume %v, at loss %v; want 2, true, %v, true", len(p.Items), p.More, p.Resume, p.AtLoss, after)
				}
			}
			// New records get sequence numbers above every old one, lost ones included.
			c := appendN(t, l2, 1000, 3, 3)
			if c[0].Seq <= all[len(all)-1].Seq || !c[0].After(all[len(all)-1]) {
				t.Fatalf("new cursor %v is not after %v", c[0], all[len(all)-1])
			}
			// Nothing intact was deleted or changed: the files hold what they held.
			l2.Close()
			for name, b := range before {
				now, err := os.ReadFile(name)
				if err != nil || !bytes.HasPrefix(now, b) {
					t.Fatalf("%s changed on open", name)
				}
			}
			// And it all holds across another restart.
			l3 := openT(t, Options{Dir: dir, SegmentBytes: 8 << 10})
			waitChecked(t, l3)
			got = readAllAround(t, l3)
			if !slices.Equal(got, append(want, c...)) {
				t.Fatalf("after a second restart: %d records, want %d", len(got), len(want)+3)
			}
			if st := l3.Stats(); len(st.Damage) != 1 || st.Damage[0].First != first {
				t.Fatalf("after a second restart: damage %+v", st.Damage)
			}
		})
	}
}

// snapshotDir returns the segment files' contents (index files may go: they are derived).
func snapshotDir(t *testing.T, dir string) map[string][]byte {
	out := map[string][]byte{}
	names, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	for _, n := range names {
		b, _ := os.ReadFile(n)
		out[n] = b
	}
	return out
}

func waitChecked(t *testing.T, l *Log) {
	t.Helper()
	for i := 0; !l.Stats().Checked; i++ {
		if i > 5000 {
			t.Fatal("the log never finished checking its segments")
		}
		sleepMs(1)
	}
}

// readAllAround reads the whole log forward as a client does: following Resume where a page
// stops short, and starting after a lost range when told of one.
func readAllAround(t *testing.T, l *Log) []cursor.Cursor {
	t.Helper()
	var out []cursor.Cursor
	var after cursor.Cursor
	for range 10000 {
		p, err := l.Read(ctx, Query{After: after, Max: 50, Ascending: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range p.Items {
			out = append(out, it.Cursor)
			after = it.Cursor
		}
		if !p.Resume.IsZero() {
			after = p.Resume
		}
		if !p.More {
			return out
		}
	}
	t.Fatal("the walk did not end")
	return nil
}

func cursorOfSeq(all []cursor.Cursor, seq uint64) cursor.Cursor {
	for _, c := range all {
		if c.Seq == seq {
			return c
		}
	}
	return cursor.Cursor{}
}

func itoa(v uint64) string { return strconv.FormatUint(v, 10) }

func sleepMs(n int) { time.Sleep(time.Duration(n) * time.Millisecond) }

// TestVerifyReportsDamageAndChangesNothing: Verify finds the same lost ranges as opening
// does, reading every file whole, and leaves every byte of the directory as it was.
func TestVerifyReportsDamageAndChangesNothing(t *testing.T) {
	for _, tc := range damageCases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l := openT(t, Options{Dir: dir, SegmentBytes: 8 << 10})
			appendN(t, l, 0, 600, 7)
			l.Close()
			clean, err := Verify(dir)
			if err != nil || !clean.Clean() || clean.Records != 600 || clean.HighMark != 600 {
				t.Fatalf("an intact log: %+v %v", clean, err)
			}
			first, last := tc.damage(t, dir, segFiles(t, dir))
			before := dirBytes(t, dir)
			r, err := Verify(dir)
			if err != nil {
				t.Fatal(err)
			}
			if r.Clean() || len(r.Damage) != 1 || r.Damage[0].First != first || r.Damage[0].Last != last {
				t.Fatalf("damage %+v, want %d..%d", r.Damage, first, last)
			}
			if want := 600 - (last - first + 1); r.Records != want {
				t.Fatalf("%d intact records, want %d", r.Records, want)
			}
			if after := dirBytes(t, dir); !maps.EqualFunc(before, after, bytes.Equal) {
				t.Fatal("Verify changed the directory")
			}
		})
	}
	// A running node holds its directory: Verify says so.
	dir := t.TempDir()
	openT(t, Options{Dir: dir})
	if _, err := Verify(dir); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("verifying a directory in use: %v", err)
	}
}

func dirBytes(t *testing.T, dir string) map[string][]byte {
	out := map[string][]byte{}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		out[e.Name()] = b
	}
	return out
}

// Verify creates nothing in the directory (no LOCK file either), and refuses a directory that
// holds no log rather than find nothing lost in it.
func TestVerifyCreatesNothingAndRefusesNoLog(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, Options{Dir: dir, SegmentBytes: 8 << 10})
	appendN(t, l, 0, 100, 7)
	l.Close()
	os.Remove(filepath.Join(dir, "LOCK"))
	before := dirBytes(t, dir)
	if r, err := Verify(dir); err != nil || !r.Clean() {
		t.Fatalf("verify: %+v %v", r, err)
	}
	if after := dirBytes(t, dir); !maps.EqualFunc(before, after, bytes.Equal) {
		t.Fatalf("Verify changed the directory: %v", slices.Sorted(maps.Keys(after)))
	}

	empty := t.TempDir()
	os.WriteFile(filepath.Join(empty, "notes.txt"), []byte("not a log"), 0o600)
	for _, d := range []string{empty, filepath.Join(empty, "missing")} {
		if r, err := Verify(d); err == nil || !strings.Contains(err.Error(), "holds no evtctl log") && !strings.Contains(err.Error(), "no such") {
			t.Fatalf("verifying %s: %+v %v; want a refusal", d, r, err)
		}
	}
	if r, err := Verify(empty); err == nil || !strings.Contains(err.Error(), "holds no evtctl log") {
		t.Fatalf("verifying a directory with no log: %+v %v", r, err)
	}
	if _, err := os.Stat(filepath.Join(empty, "LOCK")); err == nil {
		t.Fatal("Verify created a LOCK file")
	}
}
