package atomicfile

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// pendingSwitch lists the packages that still keep their own copy of a durable-file helper;
// each is to call this package instead. Remove a package from the list when it does.
var pendingSwitch = map[string]bool{}

// copies are the signs of a second copy of a helper this package holds.
var copies = regexp.MustCompile(`crc32\.MakeTable\(|flock\.New\(|\bfunc (syncDir|writeFileAtomic)\(`)

// TestOneCopyOfTheDurableHelpers fails when a package outside this one builds its own
// CRC-32C table, takes a file lock itself, or defines its own directory sync or atomic write.
func TestOneCopyOfTheDurableHelpers(t *testing.T) {
	root := filepath.Join("..", "..")
	for _, top := range []string{"pkg", "internal", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			rel = filepath.ToSlash(rel)
			if d.IsDir() {
				if rel == "internal/atomicfile" || pendingSwitch[rel] || d.Name() == "testdata" {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range copies.FindAll(b, -1) {
				t.Errorf("%s: %s: use package atomicfile", rel, m)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
