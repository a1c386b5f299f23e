// Package atomicfile holds the durable-file helpers: replacing a file so that a crash leaves
// the old content or the new, making a directory's changes durable, locking a directory
// against a second user, and the CRC-32C checksum that the on-disk formats use.
package atomicfile

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"syscall"

	"github.com/gofrs/flock"
)

// Write replaces path with data: a temporary file beside it (readable by its owner only),
// fsynced, renamed over path, and the directory fsynced so the rename is durable too. A
// crash leaves the old content or the new, and perhaps a temporary file (see IsTemp).
func Write(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return SyncDir(dir)
}

// tempName matches the temporary files of Write: "." + the target's name + ".tmp" + digits.
var tempName = regexp.MustCompile(`^\..+\.tmp[0-9]+$`)

// IsTemp reports whether a file name is that of a temporary file Write makes, which a crash
// in the middle of Write can leave behind.
func IsTemp(name string) bool { return tempName.MatchString(name) }

// RemoveTemps removes the temporary files that interrupted Writes left in dir and returns
// how many it removed. Call it only while no Write into dir can be under way, e.g. while
// holding the directory's Lock.
func RemoveTemps(dir string) (int, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, de := range des {
		if !de.Type().IsRegular() || !IsTemp(de.Name()) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, de.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return n, err
		}
		n++
	}
	if n > 0 {
		return n, SyncDir(dir)
	}
	return 0, nil
}

// SyncDir makes the creation, renaming and removal of files in dir durable. Windows cannot
// sync a directory, and some file systems refuse to (EINVAL, or not supported): there it
// does nothing, as nothing more can be done.
func SyncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, errors.ErrUnsupported) {
		return fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	return nil
}

// ErrLocked is wrapped by the error of TryLock when another process, or another Lock in
// this one, holds the lock.
var ErrLocked = errors.New("locked by another user")

// Lock is an advisory lock on a file, typically a lock file in the directory it guards:
// exclusive (TryLock) or shared (TryShared). It is released by Unlock, or when the process ends, however it ends.
type Lock struct {
	fl *flock.Flock
}

// TryLock takes the lock on the file at path, creating the file if needed, without waiting:
// when it is held elsewhere, the error wraps ErrLocked.
func TryLock(path string) (*Lock, error) {
	fl := flock.New(path, flock.SetPermissions(0o600))
	ok, err := fl.TryLock()
	if err != nil {
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	if !ok {
		return nil, fmt.Errorf("%s: %w", path, ErrLocked)
	}
	return &Lock{fl: fl}, nil
}

// TryShared takes a shared lock on the existing file at path, without waiting: any number of
// shared locks are held at once, never beside the exclusive lock of TryLock. The file is
// opened read-only and never created, so it needs no write access (a read-only copy of a
// directory): when there is no file, the error wraps fs.ErrNotExist; when the exclusive lock
// is held elsewhere, ErrLocked.
func TryShared(path string) (*Lock, error) {
	fl := flock.New(path, flock.SetFlag(os.O_RDONLY))
	ok, err := fl.TryRLock()
	if err != nil {
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	if !ok {
		return nil, fmt.Errorf("%s: %w", path, ErrLocked)
	}
	return &Lock{fl: fl}, nil
}

// Path returns the lock file's path.
func (l *Lock) Path() string { return l.fl.Path() }

// Unlock releases the lock. Unlocking twice is harmless.
func (l *Lock) Unlock() error { return l.fl.Close() }

// CRC32CTable is the table of the CRC-32C (Castagnoli) checksum, for crc32.Update.
var CRC32CTable = crc32.MakeTable(crc32.Castagnoli)

// CRC32C returns the CRC-32C (Castagnoli) checksum of b: the one checksum of evtctl's
// on-disk formats.
func CRC32C(b []byte) uint32 { return crc32.Checksum(b, CRC32CTable) }
