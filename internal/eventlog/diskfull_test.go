//go:build linux

package eventlog

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// smallDisk mounts a tmpfs of the given size for the test, or skips when this machine does
// not allow it (mounting needs privileges).
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("skipping: this test fills a small file system of its own, and mounting one was refused: %v %s", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	return dir
}

// TestDiskFullResumesByItself fills a real (small) file system: appends are refused as
// unavailable — a passing state — while it is full, nothing acknowledged is lost, and appends
// succeed again without a restart once space is freed.
func TestDiskFullResumesByItself(t *testing.T) {
	disk := smallDisk(t, "2m")
	dir := filepath.Join(disk, "log")
	l := openT(t, Options{Dir: dir, SegmentBytes: 256 << 10})
	// Most of the space goes to a file that is removed later.
	filler := filepath.Join(disk, "filler")
	if err := os.WriteFile(filler, make([]byte, 1500<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	var acked int
	var full error
	for i := 0; i < 100000 && full == nil; i += 20 {
		var es []Entry
		for j := i; j < i+20; j++ {
			es = append(es, ev(j))
		}
		if _, err := l.Append(ctx, es); err != nil {
			full = err
			break
		}
		acked += 20
	}
	if full == nil || !errors.Is(full, ErrUnavailable) || errors.Is(full, ErrFailed) {
		t.Fatalf("a full disk gave %v, want an unavailable (passing) error", full)
	}
	if !strings.Contains(full.Error(), "disk is full") {
		t.Fatalf("the error does not say the disk is full: %v", full)
	}
	if l.Failed() != nil || l.Unwritable() == nil {
		t.Fatalf("failed %v, unwritable %v: want a log that waits for space", l.Failed(), l.Unwritable())
	}
	// Reads go on; what was acknowledged is all there.
	p, err := l.Read(ctx, Query{Max: 100000, Ascending: true})
	if err != nil || len(p.Items) != acked {
		t.Fatalf("read %d items (%v), want the %d acknowledged", len(p.Items), err, acked)
	}
	// Still full: still refused, and nothing half-written is left behind.
	var big []Entry
	for j := range 200 {
		big = append(big, ev(900000+j))
	}
	if _, err := l.Append(ctx, big); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("a second append on a full disk: %v", err)
	}
	// Space comes back: appends resume by themselves.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	c := appendN(t, l, 500000, 40, 20)
	if len(c) != 40 || l.Unwritable() != nil {
		t.Fatalf("after space was freed: %d appended, unwritable %v", len(c), l.Unwritable())
	}
	// The events refused while the disk was full are taken now, not answered as repeats.
	res, err := l.Append(ctx, big)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Duplicate {
			t.Fatalf("event %d refused on a full disk is answered as a repeat once there is room", i)
		}
	}
	if !c[0].After(p.Items[len(p.Items)-1].Cursor) || c[0].Seq != uint64(acked)+1 {
		t.Fatalf("first cursor after the full disk %v, last before %v", c[0], p.Items[len(p.Items)-1].Cursor)
	}
	l.Close()
	// And the log reopens whole.
	l2 := openT(t, Options{Dir: dir, SegmentBytes: 256 << 10})
	p, err = l2.Read(ctx, Query{Max: 100000, Ascending: true})
	if err != nil || len(p.Items) != acked+40+len(big) || len(l2.Stats().Damage) != 0 {
		t.Fatalf("after reopening: %d items (%v), damage %v; want %d, none", len(p.Items), err, l2.Stats().Damage, acked+40+len(big))
	}
}

// An append queued with EnqueueAfter is not stored when the append before it was not (a
// full disk fails a write and the log goes on once there is space), nor is one queued after
// that; an append after a stored one is stored.
func TestEnqueueAfterAFailedAppendIsNotStored(t *testing.T) {
	disk := smallDisk(t, "2m")
	l := openT(t, Options{Dir: filepath.Join(disk, "log"), SegmentBytes: 256 << 10})
	filler := filepath.Join(disk, "filler")
	if err := os.WriteFile(filler, make([]byte, 1500<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	var failed *Pending
	for i := 0; i < 100000 && failed == nil; i += 20 {
		var es []Entry
		for j := i; j < i+20; j++ {
			es = append(es, ev(j))
		}
		p, err := l.Enqueue(ctx, es)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Wait(ctx); err != nil {
			failed = p
		}
	}
	if failed == nil {
		t.Fatal("the disk did not fill")
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	wait := func(p *Pending, err error) error {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		_, err = p.Wait(ctx)
		return err
	}
	after, err := l.EnqueueAfter(ctx, []Entry{ev(900001)}, failed)
	if err := wait(after, err); !errors.Is(err, ErrPredecessorNotStored) {
		t.Fatalf("after a failed append: %v", err)
	}
	chained, err := l.EnqueueAfter(ctx, []Entry{ev(900002)}, after)
	if err := wait(chained, err); !errors.Is(err, ErrPredecessorNotStored) {
		t.Fatalf("after a refused append: %v", err)
	}
	free, err := l.Enqueue(ctx, []Entry{ev(900003)})
	if err := wait(free, err); err != nil {
		t.Fatalf("an append with no condition once there is space: %v", err)
	}
	next, err := l.EnqueueAfter(ctx, []Entry{ev(900004)}, free)
	if err := wait(next, err); err != nil {
		t.Fatalf("after a stored append: %v", err)
	}
	p, err := l.Read(ctx, Query{Max: 1000, Ascending: false})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, it := range p.Items[:2] {
		ids = append(ids, string(it.JSON))
	}
	if len(p.Items) < 2 || !strings.Contains(ids[0], `"id-900004"`) || !strings.Contains(ids[1], `"id-900003"`) {
		t.Fatalf("the newest items are %v, want id-900004 and id-900003", ids)
	}
	for _, it := range p.Items {
		if s := string(it.JSON); strings.Contains(s, `"id-900001"`) || strings.Contains(s, `"id-900002"`) {
			t.Fatalf("a refused append was stored: %s", s)
		}
	}
}

// A first start that fails for want of space (the segment file fits, its high-water mark does
// not) leaves a directory that opens once there is space: the mark is written whole or not
// at all, never left empty.
func TestFirstStartOnAFullDisk(t *testing.T) {
	disk := smallDisk(t, "256k")
	var st syscall.Statfs_t
	if err := syscall.Statfs(disk, &st); err != nil {
		t.Fatal(err)
	}
	page := int64(st.Bsize)
	filler := filepath.Join(disk, "filler")
	// Room for one block: the first segment file's.
	if err := os.WriteFile(filler, make([]byte, int64(st.Bavail)*page-page), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(disk, "log")
	if _, err := Open(Options{Dir: dir}); err == nil {
		t.Fatal("a first start with no room for its files succeeded")
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	l, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatalf("after space was freed: %v", err)
	}
	defer l.Close()
	if c := appendN(t, l, 0, 3, 3); c[0].Seq != 1 {
		t.Fatalf("the first event got %v", c[0])
	}
}
