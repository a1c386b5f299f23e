package eventlog

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/evtctl/evtctl/internal/atomicfile"
)

// Report is what Verify found in a log's data directory.
type Report struct {
	Dir      string
	Files    int    // segment files
	Records  uint64 // intact records
	Damage   []Damage
	HighMark uint64 // the highest sequence number the log committed; 0 when it does not say
	LowMark  uint64 // where the log starts (retention dropped what was below); 0 when it does not say
	// Notes are what opening the log would change or set aside without losing an event: a
	// torn tail (never acknowledged) cut off, index files that no longer match, leftovers.
	Notes []string
	// Problems are what stops the log from opening (a damaged mark file): the log was read
	// without what they hide, so losses they would have shown may be missing from Damage.
	Problems []string
}

// Clean reports whether no event was lost.
func (r *Report) Clean() bool { return len(r.Damage) == 0 }

// Verify reads every record of the log in dir — every file whole, whatever its index file
// says — and reports each range of events lost to damage, changing nothing. It needs no write
// access: it creates nothing, and takes a shared lock on the LOCK file when there is one, so
// that a running node's directory is refused (stop it, or verify a copy) and a read-only copy
// is read. A directory that holds no log (no segment file, no mark file) is refused.
func Verify(dir string) (*Report, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("data directory %s is not a directory", dir)
	}
	lock, err := atomicfile.TryShared(filepath.Join(dir, "LOCK"))
	switch {
	case errors.Is(err, atomicfile.ErrLocked):
		return nil, fmt.Errorf("data directory %s is in use by a running node: stop it, or verify a copy of the directory", dir)
	case errors.Is(err, fs.ErrNotExist):
		// No node has run here (or the copy left the file out): none runs now.
	case err != nil:
		return nil, fmt.Errorf("lock data directory: %w", err)
	default:
		defer lock.Unlock()
	}
	if ok, err := holdsLog(dir); err != nil {
		return nil, err
	} else if !ok {
		return nil, fmt.Errorf("data directory %s holds no evtctl log: no segment file (*.seg), no %s or %s file; is --data-dir right?", dir, highMark.file, lowMark.file)
	}
	r := &Report{Dir: dir}
	var mk marks
	for _, m := range []struct {
		st *markState
		k  markKind
	}{{&mk.high, highMark}, {&mk.low, lowMark}} {
		var me *markError
		switch *m.st, err = readMark(dir, m.k); {
		case errors.As(err, &me):
			r.Problems = append(r.Problems, fmt.Sprintf("the %s file %s is damaged (neither of its two copies is intact): the node will not open the log until it is removed; without it, %s", m.k.what, me.path, m.k.without))
		case err != nil:
			return nil, err
		case m.st.empty:
			r.Notes = append(r.Notes, fmt.Sprintf("the %s file is empty (an earlier version was stopped while creating it): opening writes it anew; until then %s", m.k.what, m.k.without))
		case !m.st.known:
			r.Notes = append(r.Notes, fmt.Sprintf("no %s file: %s", m.k.what, m.k.without))
		}
	}
	if mk.high.known {
		r.HighMark = mk.high.seq
	}
	if mk.low.known {
		r.LowMark = mk.low.seq
	}
	notes := &noteLog{}
	ld, err := loadDir(dir, mk, notes, true)
	defer ld.release()
	if err != nil {
		return nil, err
	}
	for _, s := range ld.segs {
		r.Records += s.count
	}
	names, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	r.Files = len(names)
	r.Damage = ld.damage
	r.Notes = append(r.Notes, notes.notes...)
	return r, nil
}

// holdsLog reports whether dir holds anything of a log: a segment file or a mark file.
func holdsLog(dir string) (bool, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.seg"))
	if err != nil || len(names) > 0 {
		return len(names) > 0, err
	}
	for _, k := range []markKind{highMark, lowMark} {
		if _, err := os.Lstat(filepath.Join(dir, k.file)); err == nil {
			return true, nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return false, err
		}
	}
	return false, nil
}

// noteLog collects what opening would log as warnings, as sentences.
type noteLog struct{ notes []string }

func (n *noteLog) Warn(msg string, args ...any) { n.add(msg, args) }

// Error: damage is collected by loadDir itself; what else is logged as an error (a damaged
// header) is noted.
func (n *noteLog) Error(msg string, args ...any) { n.add(msg, args) }

func (n *noteLog) add(msg string, args []any) {
	var b strings.Builder
	b.WriteString(strings.TrimPrefix(msg, "eventlog: "))
	for i := 0; i+1 < len(args); i += 2 {
		fmt.Fprintf(&b, " %v=%v", args[i], args[i+1])
	}
	n.notes = append(n.notes, b.String())
}
