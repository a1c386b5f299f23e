// Package atomicfile replaces small files so that a crash leaves either the old content or
// the new, never a mix: checkpoints, retry state, configuration.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// Write replaces path with data: a temporary file beside it (readable by its owner only),
// fsynced, renamed over path, and the directory fsynced so the rename is durable too.
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

// SyncDir makes the creation, renaming and removal of files in dir durable. Windows
// cannot sync a directory; there it does nothing.
func SyncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	return nil
}
