package eventlog

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A file named like a segment that is not one — its header does not read, and no record in
// it does — is refused, as a file named junk.seg is: not cut back, not removed, not taken
// for lost events. A segment of the log whose header is damaged, or whose bytes were all
// zeroed, is still read.
func TestForeignSegmentFileIsRefused(t *testing.T) {
	text := bytes.Repeat([]byte(`{"not":"an evtctl segment"}`+"\n"), 2500)
	for _, tc := range []struct {
		name string
		// file returns the path and content of the file put in the log's directory.
		file func(dir string, last uint64) (string, []byte)
	}{
		{"after the last segment", func(dir string, last uint64) (string, []byte) {
			return segName(dir, last+100_000), text
		}},
		{"before the first segment", func(dir string, last uint64) (string, []byte) {
			return segName(dir, 0), text
		}},
		{"short, after the last segment", func(dir string, last uint64) (string, []byte) {
			return segName(dir, last+1), []byte("not a log\n")
		}},
		{"junk.seg", func(dir string, last uint64) (string, []byte) {
			return filepath.Join(dir, "junk.seg"), text
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l := openT(t, Options{Dir: dir, SegmentBytes: 8 << 10})
			appendN(t, l, 0, 200, 5)
			l.Close()
			path, content := tc.file(dir, 200)
			if err := os.WriteFile(path, content, 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Open(Options{Dir: dir, SegmentBytes: 8 << 10})
			if err == nil || !strings.Contains(err.Error(), filepath.Base(path)) || !strings.Contains(err.Error(), "not an evtctl segment") {
				t.Fatalf("opening with %s in the directory: %v", filepath.Base(path), err)
			}
			if _, err := Verify(dir); err == nil || !strings.Contains(err.Error(), "not an evtctl segment") {
				t.Fatalf("verifying: %v", err)
			}
			if b, err := os.ReadFile(path); err != nil || !bytes.Equal(b, content) {
				t.Fatalf("the foreign file was changed (%d bytes of %d, %v)", len(b), len(content), err)
			}
			os.Remove(path)
			l = openT(t, Options{Dir: dir, SegmentBytes: 8 << 10})
			if st := l.Stats(); len(st.Damage) != 0 || st.Items != 200 {
				t.Fatalf("once it is moved out: damage %v, %d items", st.Damage, st.Items)
			}
		})
	}
}

// A segment of the log whose header is damaged is read by the base in its name; one whose
// bytes were all zeroed (a file system that lost what it held) holds lost events.
func TestDamagedSegmentHeaderIsRead(t *testing.T) {
	for _, zero := range []bool{false, true} {
		t.Run(fmt.Sprintf("zeroed=%v", zero), func(t *testing.T) {
			dir := t.TempDir()
			l := openT(t, Options{Dir: dir, SegmentBytes: 8 << 10})
			all := appendN(t, l, 0, 200, 5)
			l.Close()
			seg := lastSegment(t, dir)
			fr := framesOf(t, seg)
			b, _ := os.ReadFile(seg)
			if zero {
				clear(b)
			} else {
				b[1] ^= 0x20 // the magic
			}
			os.WriteFile(seg, b, 0o600)
			l = openT(t, Options{Dir: dir, SegmentBytes: 8 << 10})
			st := l.Stats()
			switch {
			case zero:
				if len(st.Damage) != 1 || st.Damage[0].First != fr[0].seq || st.Damage[0].Last != 200 {
					t.Fatalf("a zeroed last segment: damage %+v, want %d..200", st.Damage, fr[0].seq)
				}
			default:
				p, err := l.Read(ctx, Query{Max: 1000, Ascending: true})
				if err != nil || len(p.Items) != 200 || p.Items[199].Cursor != all[199] || len(st.Damage) != 0 {
					t.Fatalf("a damaged header: %d items (%v), damage %v", len(p.Items), err, st.Damage)
				}
			}
			if c := appendN(t, l, 1000, 2, 2); c[0].Seq != 201 {
				t.Fatalf("the next event got %v", c[0])
			}
		})
	}
}
