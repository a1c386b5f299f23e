package outbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/evtctl/evtctl/internal/atomicfile"
)

func ev(id string) []byte {
	return fmt.Appendf(nil, `{"specversion":"1.0","id":%q,"source":"/s","type":"t","data":{"msg":"a\nb ☃"}}`, id)
}

func open(t *testing.T, dir string) *Spool {
	t.Helper()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func pending(t *testing.T, s *Spool) []Entry {
	t.Helper()
	es, err := s.Pending()
	if err != nil {
		t.Fatal(err)
	}
	return es
}

func events(t *testing.T, e Entry) [][]byte {
	t.Helper()
	evs, err := e.Events()
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func names(es []Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Name)
	}
	return out
}

func TestRoundTrip(t *testing.T) {
	s := open(t, t.TempDir())
	b1 := [][]byte{ev("1"), ev("2")}
	b2 := [][]byte{ev("3")}
	e1, err := s.Put(b1)
	if err != nil {
		t.Fatal(err)
	}
	e2, err := s.Put(b2)
	if err != nil {
		t.Fatal(err)
	}
	es := pending(t, s)
	if !slices.Equal(names(es), []string{e1.Name, e2.Name}) {
		t.Fatalf("pending %v, want %s %s", names(es), e1.Name, e2.Name)
	}
	if got := events(t, es[0]); !slices.EqualFunc(got, b1, bytes.Equal) {
		t.Errorf("first entry %q", got)
	}
	if got := events(t, es[1]); !slices.EqualFunc(got, b2, bytes.Equal) {
		t.Errorf("second entry %q", got)
	}
	if err := s.Done(es[0]); err != nil {
		t.Fatal(err)
	}
	if err := s.Done(es[0]); err != nil {
		t.Errorf("Done twice: %v", err)
	}
	if es := pending(t, s); !slices.Equal(names(es), []string{e2.Name}) {
		t.Errorf("after Done: %v", names(es))
	}
	if err := s.Done(e2); err != nil {
		t.Fatal(err)
	}
	if es := pending(t, s); len(es) != 0 {
		t.Errorf("after Done: %v", names(es))
	}
}

func TestPutCompactsAndChecks(t *testing.T) {
	s := open(t, t.TempDir())
	pretty := []byte("{\n  \"specversion\": \"1.0\",\n  \"id\": \"x\",\n  \"data\": [1, 2]\n}\n")
	e, err := s.Put([][]byte{pretty})
	if err != nil {
		t.Fatal(err)
	}
	got := events(t, e)
	if len(got) != 1 || string(got[0]) != `{"specversion":"1.0","id":"x","data":[1,2]}` {
		t.Errorf("stored %q", got)
	}
	for _, batch := range [][][]byte{nil, {}, {[]byte(`{"a":`)}, {[]byte(`[1]`)}, {[]byte(``)}, {ev("ok"), []byte(`"str"`)}} {
		if _, err := s.Put(batch); err == nil {
			t.Errorf("Put(%q) accepted", batch)
		}
	}
	if es := pending(t, s); len(es) != 1 {
		t.Errorf("refused batches left entries: %v", names(es))
	}
	assertNoTemp(t, s.dir)
}

func TestCreationOrder(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	var want []string
	for i := range 300 {
		e, err := s.Put([][]byte{ev(fmt.Sprint(i))})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, e.Name)
	}
	es := pending(t, s)
	if !slices.Equal(names(es), want) {
		t.Fatalf("pending order differs from put order")
	}
	for i, e := range es {
		if got := events(t, e); len(got) != 1 || !bytes.Contains(got[0], fmt.Appendf(nil, `"id":"%d"`, i)) {
			t.Fatalf("entry %d holds %q", i, got)
		}
	}
}

func TestSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	e1, _ := s.Put([][]byte{ev("1")})
	e2, _ := s.Put([][]byte{ev("2")})
	if err := s.Done(e1); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put([][]byte{ev("x")}); !errors.Is(err, ErrClosed) {
		t.Errorf("Put after Close: %v", err)
	}
	if _, err := s.Pending(); !errors.Is(err, ErrClosed) {
		t.Errorf("Pending after Close: %v", err)
	}
	if err := s.Done(e2); !errors.Is(err, ErrClosed) {
		t.Errorf("Done after Close: %v", err)
	}

	s2 := open(t, dir)
	es := pending(t, s2)
	if !slices.Equal(names(es), []string{e2.Name}) {
		t.Fatalf("after reopen: %v", names(es))
	}
	if got := events(t, es[0]); len(got) != 1 || !bytes.Equal(got[0], ev("2")) {
		t.Errorf("after reopen: %q", got)
	}
	e3, err := s2.Put([][]byte{ev("3")})
	if err != nil {
		t.Fatal(err)
	}
	if e3.Name <= e2.Name {
		t.Errorf("new entry %s does not sort after %s", e3.Name, e2.Name)
	}
}

func TestTornTempFileIgnoredAndCleaned(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	e, _ := s.Put([][]byte{ev("1")})
	// A crash in the middle of a Put leaves a partial temporary file.
	torn := filepath.Join(dir, "put-12345.tmp")
	if err := os.WriteFile(torn, []byte("evtctl-outbox v1 events=1 bytes=90 crc32c=00000000\n{\"specver"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Files that are not entries are left alone.
	other := filepath.Join(dir, "README")
	os.WriteFile(other, []byte("hi"), 0o600)
	if es := pending(t, s); !slices.Equal(names(es), []string{e.Name}) {
		t.Errorf("pending %v", names(es))
	}
	s.Close()
	s = open(t, dir)
	if _, err := os.Stat(torn); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the torn temp file is still there: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("a foreign file was removed: %v", err)
	}
	if es := pending(t, s); !slices.Equal(names(es), []string{e.Name}) {
		t.Errorf("pending %v", names(es))
	}
}

func TestCorruptEntriesMovedAside(t *testing.T) {
	cases := []struct {
		name   string
		damage func([]byte) []byte
		want   string
	}{
		{"truncated", func(b []byte) []byte { return b[:len(b)-10] }, "torn write"},
		{"header only", func(b []byte) []byte { return b[:bytes.IndexByte(b, '\n')] }, "no header line"},
		{"flipped byte", func(b []byte) []byte { b[len(b)-5] ^= 0x20; return b }, "checksum"},
		{"appended", func(b []byte) []byte { return append(b, "{}\n"...) }, "header says"},
		{"empty", func([]byte) []byte { return nil }, "no header line"},
		{"foreign", func([]byte) []byte { return []byte("hello\nworld\n") }, "unrecognised header"},
		{"bad count", func(b []byte) []byte {
			return bytes.Replace(b, []byte("events=2"), []byte("events=3"), 1)
		}, "3"},
		{"not JSON", func([]byte) []byte {
			return []byte("evtctl-outbox v1 events=1 bytes=4 crc32c=" + fmt.Sprintf("%08x", crc32c([]byte("{x}\n"))) + "\n{x}\n")
		}, "not a JSON object"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			s := open(t, dir)
			good, _ := s.Put([][]byte{ev("3")})
			bad, _ := s.Put([][]byte{ev("1"), ev("2")})
			b, err := os.ReadFile(filepath.Join(dir, bad.Name))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, bad.Name), c.damage(b), 0o600); err != nil {
				t.Fatal(err)
			}
			es := pending(t, s)
			if len(es) != 2 {
				t.Fatalf("pending %v", names(es))
			}
			got, err := es[1].Events()
			if !errors.Is(err, ErrCorrupt) || got != nil {
				t.Fatalf("Events = %q, %v; want ErrCorrupt and nothing", got, err)
			}
			if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), bad.Name+".bad") {
				t.Errorf("error %q does not say %q and where the entry went", err, c.want)
			}
			if _, err := os.Stat(filepath.Join(dir, bad.Name+".bad")); err != nil {
				t.Errorf("not moved aside: %v", err)
			}
			if es := pending(t, s); !slices.Equal(names(es), []string{good.Name}) {
				t.Errorf("pending after: %v", names(es))
			}
			if got := events(t, good); len(got) != 1 {
				t.Errorf("good entry %q", got)
			}
			// A reopened spool never reuses the name of an entry moved
			// aside, even when it was the newest.
			if err := s.Done(good); err != nil {
				t.Fatal(err)
			}
			s.Close()
			s2 := open(t, dir)
			e, err := s2.Put([][]byte{ev("4")})
			if err != nil {
				t.Fatal(err)
			}
			if e.Name <= bad.Name {
				t.Errorf("new entry %s reuses an old name", e.Name)
			}
		})
	}
}

func TestConcurrentOpenRefused(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s2, err := Open(dir); !errors.Is(err, ErrLocked) {
		if s2 != nil {
			s2.Close()
		}
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
	// Another process is refused too.
	out, err := helper(dir)
	if err == nil || !strings.Contains(out, "in use") {
		t.Errorf("another process opened the locked spool: %v %s", err, out)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if out, err := helper(dir); err != nil {
		t.Errorf("another process could not open the released spool: %v %s", err, out)
	}
	s3 := open(t, dir)
	if _, err := s3.Put([][]byte{ev("1")}); err != nil {
		t.Fatal(err)
	}
}

// helper opens dir in a child process (this test binary).
func helper(dir string) (string, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), "OUTBOX_HELPER_DIR="+dir)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestHelperProcess(t *testing.T) {
	dir := os.Getenv("OUTBOX_HELPER_DIR")
	if dir == "" {
		t.Skip("run as a child process by TestConcurrentOpenRefused")
	}
	s, err := Open(dir)
	if err != nil {
		fmt.Println(err)
		os.Exit(3)
	}
	s.Close()
	os.Exit(0)
}

func TestConcurrentPuts(t *testing.T) {
	s := open(t, t.TempDir())
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 25 {
				if _, err := s.Put([][]byte{ev(fmt.Sprintf("%d-%d", g, i))}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	es := pending(t, s)
	if len(es) != 200 {
		t.Fatalf("%d entries, want 200", len(es))
	}
	seen := map[string]bool{}
	for _, e := range es {
		var m struct{ ID string }
		if err := json.Unmarshal(events(t, e)[0], &m); err != nil || seen[m.ID] {
			t.Fatalf("entry %s: %q %v", e.Name, m.ID, err)
		}
		seen[m.ID] = true
	}
	assertNoTemp(t, s.dir)
}

func TestDoneChecksTheSpool(t *testing.T) {
	s1 := open(t, t.TempDir())
	s2 := open(t, t.TempDir())
	e, _ := s1.Put([][]byte{ev("1")})
	if err := s2.Done(e); err == nil {
		t.Error("Done removed another spool's entry")
	}
	if err := s2.Done(Entry{Name: "x"}); err == nil {
		t.Error("Done accepted a made-up entry")
	}
	if _, err := (Entry{Name: "x"}).Events(); err == nil {
		t.Error("Events of a made-up entry")
	}
	if len(pending(t, s1)) != 1 {
		t.Error("the entry is gone")
	}
}

func assertNoTemp(t *testing.T, dir string) {
	t.Helper()
	des, _ := os.ReadDir(dir)
	for _, de := range des {
		if atomicfile.IsTemp(de.Name()) || strings.HasSuffix(de.Name(), ".tmp") {
			t.Errorf("temporary file left: %s", de.Name())
		}
	}
}

func crc32c(b []byte) uint32 { return atomicfile.CRC32C(b) }

func TestRewriteKeepsTheRest(t *testing.T) {
	s := open(t, t.TempDir())
	var es []Entry
	for i := range 3 {
		e, err := s.Put([][]byte{ev(fmt.Sprint(i, "a")), ev(fmt.Sprint(i, "b")), ev(fmt.Sprint(i, "c"))})
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, e)
	}
	// The first two events of the middle entry were accepted; the third is still to go.
	if err := s.Rewrite(es[1], [][]byte{ev("1c")}); err != nil {
		t.Fatal(err)
	}
	got := pending(t, s)
	if !slices.Equal(names(got), names(es)) {
		t.Fatalf("pending %v, want %v: the entry lost its place", names(got), names(es))
	}
	if evs := events(t, got[1]); len(evs) != 1 || !bytes.Contains(evs[0], []byte(`"id":"1c"`)) {
		t.Errorf("rewritten entry holds %q", evs)
	}
	// Nothing left: the entry goes.
	if err := s.Rewrite(es[0], nil); err != nil {
		t.Fatal(err)
	}
	if got := pending(t, s); len(got) != 2 {
		t.Errorf("pending %v", names(got))
	}
	// An entry that is gone is not brought back.
	if err := s.Rewrite(es[0], [][]byte{ev("0a")}); err == nil {
		t.Error("Rewrite brought back an entry that was done")
	}
	if err := s.Rewrite(es[2], [][]byte{[]byte("[1]")}); err == nil {
		t.Error("Rewrite stored something that is not an event")
	}
	if len(events(t, pending(t, s)[1])) != 3 {
		t.Error("a refused Rewrite changed the entry")
	}
	assertNoTemp(t, s.dir)
}

func TestInterruptedWriteCleaned(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	e, _ := s.Put([][]byte{ev("1")})
	s.Close()
	// What a crash in the middle of atomicfile.Write leaves: a temporary file beside the entry.
	torn := filepath.Join(dir, ".0000000000000002.entry.tmp4242")
	if err := os.WriteFile(torn, []byte("evtctl-outbox v1 events=1"), 0o600); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir)
	if _, err := os.Stat(torn); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the torn temporary file is still there: %v", err)
	}
	if es := pending(t, s); !slices.Equal(names(es), []string{e.Name}) {
		t.Errorf("pending %v", names(es))
	}
	if e2, _ := s.Put([][]byte{ev("2")}); e2.Name != entryName(2) {
		t.Errorf("next entry %s, want %s", e2.Name, entryName(2))
	}
}

func TestDeadLettersAppendOnFreshLines(t *testing.T) {
	s := open(t, t.TempDir())
	dl := DeadLetter{Target: "http://x/events", ID: "1", Status: 400, Reason: "bad", Event: ev("1")}
	if err := s.AddDeadLetters([]DeadLetter{dl}); err != nil {
		t.Fatal(err)
	}
	// A torn line, as a crash in the middle of an append leaves.
	f, _ := os.OpenFile(s.DeadLetterPath(), os.O_APPEND|os.O_WRONLY, 0o600)
	f.WriteString(`{"id":"torn`)
	f.Close()
	dl.ID, dl.Event = "2", ev("2")
	if err := s.AddDeadLetters([]DeadLetter{dl}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(s.DeadLetterPath())
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("lines %q", lines)
	}
	for _, i := range []int{0, 2} {
		var got DeadLetter
		if err := json.Unmarshal([]byte(lines[i]), &got); err != nil || got.Status != 400 || !json.Valid(got.Event) {
			t.Errorf("line %d %q: %v", i, lines[i], err)
		}
	}
	if len(pending(t, s)) != 0 {
		t.Error("the dead-letter file is listed as an entry")
	}
}
