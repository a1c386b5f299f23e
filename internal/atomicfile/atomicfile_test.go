package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

func TestWriteReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	for _, content := range []string{"first\n", "second, longer than the first\n", ""} {
		if err := Write(path, []byte(content)); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != content {
			t.Fatalf("read %q, %v; want %q", got, err, content)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("temporary files left behind: %v", entries)
	}
	if runtime.GOOS != "windows" {
		st, _ := os.Stat(path)
		if st.Mode().Perm() != 0o600 {
			t.Fatalf("mode %v, want 0600", st.Mode().Perm())
		}
	}
}

func TestWriteMissingDirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no", "such", "file")
	if err := Write(path, []byte("x")); err == nil {
		t.Fatal("writing into a missing directory succeeded")
	}
}

func TestWriteOverDirectoryLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "taken")
	if err := os.Mkdir(target, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(target, "keep"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Write(target, []byte("x")); err == nil {
		t.Fatal("replacing a non-empty directory succeeded")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("the failed write left %v", entries)
	}
}

func TestTryLockExcludes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "LOCK")
	l, err := TryLock(path)
	if err != nil {
		t.Fatal(err)
	}
	if l.Path() != path {
		t.Errorf("Path() = %q", l.Path())
	}
	if _, err := TryLock(path); !errors.Is(err, ErrLocked) {
		t.Fatalf("a second TryLock: %v, want ErrLocked", err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(); err != nil {
		t.Errorf("unlocking twice: %v", err)
	}
	l2, err := TryLock(path)
	if err != nil {
		t.Fatalf("after Unlock: %v", err)
	}
	l2.Unlock()
}

func TestTryLockMissingDirectory(t *testing.T) {
	if _, err := TryLock(filepath.Join(t.TempDir(), "no", "LOCK")); err == nil || errors.Is(err, ErrLocked) {
		t.Fatalf("err = %v, want a failure that is not ErrLocked", err)
	}
}

func TestRemoveTempsLeavesOtherFiles(t *testing.T) {
	dir := t.TempDir()
	if err := Write(filepath.Join(dir, "state.json"), []byte("{}")); err != nil {
		t.Fatal(err)
	}
	// What a crash between CreateTemp and Rename leaves, and files that only look alike.
	f, err := os.CreateTemp(dir, ".state.json.tmp*")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if !IsTemp(filepath.Base(f.Name())) {
		t.Fatalf("IsTemp(%q) = false", filepath.Base(f.Name()))
	}
	keep := []string{"state.json", "x.tmp", ".x.tmp", ".hidden", "0000000000000001.entry"}
	for _, name := range keep[1:] {
		if IsTemp(name) {
			t.Errorf("IsTemp(%q) = true", name)
		}
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	n, err := RemoveTemps(dir)
	if err != nil || n != 1 {
		t.Fatalf("RemoveTemps = %d, %v; want 1", n, err)
	}
	des, _ := os.ReadDir(dir)
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	if len(names) != len(keep) {
		t.Errorf("left %v, want %v", names, keep)
	}
}

func TestSyncDir(t *testing.T) {
	if err := SyncDir(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if err := SyncDir(filepath.Join(t.TempDir(), "missing")); err == nil && runtime.GOOS != "windows" {
		t.Fatal("syncing a missing directory succeeded")
	}
}

func TestCRC32C(t *testing.T) {
	// The check value of CRC-32C.
	if got := CRC32C([]byte("123456789")); got != 0xe3069283 {
		t.Fatalf("CRC32C = %08x, want e3069283", got)
	}
}

// Shared locks go together and exclude the exclusive one, both ways; taking one creates no
// file.
func TestTrySharedBesideTryLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "LOCK")
	if _, err := TryShared(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a shared lock on no file: %v, want ErrNotExist", err)
	}
	if _, err := os.Stat(path); err == nil {
		t.Fatal("TryShared created the file")
	}
	l, err := TryLock(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := TryShared(path); !errors.Is(err, ErrLocked) {
		t.Fatalf("a shared lock beside an exclusive one: %v, want ErrLocked", err)
	}
	l.Unlock()
	s1, err := TryShared(path)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := TryShared(path)
	if err != nil {
		t.Fatalf("a second shared lock: %v", err)
	}
	if _, err := TryLock(path); !errors.Is(err, ErrLocked) {
		t.Fatalf("an exclusive lock beside shared ones: %v, want ErrLocked", err)
	}
	s1.Unlock()
	s2.Unlock()
	l, err = TryLock(path)
	if err != nil {
		t.Fatalf("once the shared locks are gone: %v", err)
	}
	l.Unlock()
}
