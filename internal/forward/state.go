package forward

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/evtctl/evtctl/internal/atomicfile"
	"github.com/evtctl/evtctl/pkg/cursor"
)

// Files in a state directory.
const (
	journalName = "journal"
	goneName    = "gone.json"
	lockName    = "lock"
)

// ErrLocked is returned by OpenState when another forwarder uses the directory.
var ErrLocked = errors.New("another evtctl forward is using this state directory")

// State is a forwarder's durable state, kept in a directory:
//
//	journal    the retry store and the events settled after the checkpoint (see journal.go)
//	gone.json  written when the receiver answered 410 Gone; while it exists, forward refuses to start
//	lock       held while a forwarder uses the directory
//
// The checkpoint file itself is kept by the caller (Options.Checkpoint), beside it.
type State struct {
	dir   string
	lock  *atomicfile.Lock
	f     *os.File // the journal, open for appending
	size  int64    // the journal's length
	dirty bool     // appended to since the last fsync
	js    *journalState

	// At open: whether the directory held no journal yet, and how many bytes of a damaged
	// tail were dropped.
	fresh    bool
	repaired int64

	order func(a, b string) int // the log's order of cursors, from the forwarder's Options
}

// OpenState opens (creating if needed) the state directory dir and locks it. A torn tail of
// the journal, left by a crash, is cut off and the journal rewritten compactly.
func OpenState(dir string) (*State, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	lock, err := atomicfile.TryLock(filepath.Join(dir, lockName))
	if errors.Is(err, atomicfile.ErrLocked) {
		return nil, fmt.Errorf("state directory %s: %w", dir, ErrLocked)
	}
	if err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	s := &State{dir: dir, lock: lock}
	if _, err := atomicfile.RemoveTemps(dir); err != nil { // left by a crash in a rewrite
		lock.Unlock()
		return nil, fmt.Errorf("state: %w", err)
	}
	data, err := os.ReadFile(s.journalPath())
	switch {
	case errors.Is(err, fs.ErrNotExist):
		s.fresh = true
	case err != nil:
		lock.Unlock()
		return nil, fmt.Errorf("state: %w", err)
	}
	js, valid, err := decodeJournal(data)
	if err != nil {
		lock.Unlock()
		return nil, fmt.Errorf("state: %s: %w (move it aside to start afresh)", s.journalPath(), err)
	}
	s.js, s.repaired = js, int64(len(data)-valid)
	if err := s.compact(); err != nil {
		lock.Unlock()
		return nil, err
	}
	return s, nil
}

// Dir returns the state directory.
func (s *State) Dir() string { return s.dir }

// Fresh reports whether the directory held no journal when it was opened: no forwarder had
// used it before.
func (s *State) Fresh() bool { return s.fresh }

// Repaired returns how many bytes of a damaged journal tail were dropped at open.
func (s *State) Repaired() int64 { return s.repaired }

// Pending returns the number of events in the retry store.
func (s *State) Pending() int { return len(s.js.live) }

func (s *State) journalPath() string { return filepath.Join(s.dir, journalName) }

// GonePath returns the file that records a 410 Gone.
func (s *State) GonePath() string { return filepath.Join(s.dir, goneName) }

// Close releases the directory.
func (s *State) Close() error {
	var err error
	if s.f != nil {
		err = s.f.Close()
		s.f = nil
	}
	if uerr := s.lock.Unlock(); err == nil {
		err = uerr
	}
	return err
}

// GoneRecord says that the receiver answered 410 Gone.
type GoneRecord struct {
	Target string    `json:"target"`
	Time   time.Time `json:"time"`
	ID     string    `json:"id,omitempty"`
	Cursor string    `json:"cursor,omitempty"`
	Reason string    `json:"reason,omitempty"`
}

// Gone returns the record of a 410 Gone, or nil when there is none. A record that cannot be
// read still counts: forward must not go on to a receiver that may have retired.
func (s *State) Gone() (*GoneRecord, error) {
	b, err := os.ReadFile(s.GonePath())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	var g GoneRecord
	if json.Unmarshal(b, &g) != nil {
		return &GoneRecord{Reason: "(the record is unreadable)"}, nil
	}
	return &g, nil
}

// setGone writes the record of a 410 Gone atomically.
func (s *State) setGone(g *GoneRecord) error {
	b, err := json.MarshalIndent(g, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(s.GonePath(), append(b, '\n')); err != nil {
		return fmt.Errorf("state: %w", err)
	}
	return nil
}

// compare orders two cursors of the log, as the forwarder's Options.Compare does.
func (s *State) compare(a, b string) int {
	if s.order != nil {
		return s.order(a, b)
	}
	return cursor.CompareText(a, b)
}

// entries returns the events in the retry store, and the events settled after the checkpoint.
func (s *State) entries() (live []*entry, done map[string]bool) {
	for _, e := range s.js.live {
		live = append(live, e)
	}
	slices.SortFunc(live, func(a, b *entry) int { return s.compare(a.Cursor, b.Cursor) })
	return live, maps.Clone(s.js.done)
}

// append writes records to the journal: when it returns nil, they survive a crash of the
// process; with sync, they are fsynced too and survive a power loss.
func (s *State) append(recs []*record, sync bool) error {
	var buf []byte
	for _, r := range recs {
		var err error
		if buf, err = appendRecord(buf, r); err != nil {
			return fmt.Errorf("state: %w", err)
		}
	}
	if _, err := s.f.Write(buf); err != nil {
		return fmt.Errorf("state: writing the journal: %w", err)
	}
	s.size += int64(len(buf))
	s.dirty = true
	if sync {
		if err := s.sync(); err != nil {
			return err
		}
	}
	for _, r := range recs {
		_ = s.js.apply(r) // records are made by the forwarder and apply cleanly
	}
	return nil
}

// sync fsyncs what was appended to the journal.
func (s *State) sync() error {
	if !s.dirty {
		return nil
	}
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("state: syncing the journal: %w", err)
	}
	s.dirty = false
	return nil
}

// compactMin is the journal size below which it is not rewritten.
const compactMin = 1 << 20

// checkpointed is told that the checkpoint file now holds cursor w: events settled at or
// before it need no record, and the journal is rewritten when it has grown well past what
// it holds.
func (s *State) checkpointed(w string) error {
	for c := range s.js.done {
		if s.compare(c, w) <= 0 {
			delete(s.js.done, c)
		}
	}
	liveSize := s.js.size + int64(len(s.js.live))*256 + int64(len(s.js.done))*64
	if s.size > compactMin && s.size > 4*liveSize {
		return s.compact()
	}
	return nil
}

// compact rewrites the journal to hold only what is live, atomically.
func (s *State) compact() error {
	buf := []byte(journalHeader)
	live, _ := s.entries()
	var err error
	for _, e := range live {
		buf, err = appendRecord(buf, &record{Op: opRetry, Cursor: e.Cursor, Tier: e.Tier, Attempts: e.Attempts, Due: e.Due, Status: e.Status, Reason: e.Reason, Event: e.Event})
		if err != nil {
			return fmt.Errorf("state: %w", err)
		}
	}
	done := make([]string, 0, len(s.js.done))
	for c := range s.js.done {
		done = append(done, c)
	}
	slices.SortFunc(done, s.compare)
	for _, c := range done {
		if buf, err = appendRecord(buf, &record{Op: opDone, Cursor: c}); err != nil {
			return fmt.Errorf("state: %w", err)
		}
	}
	if s.f != nil {
		s.f.Close()
		s.f = nil
	}
	if err := atomicfile.Write(s.journalPath(), buf); err != nil {
		return fmt.Errorf("state: %w", err)
	}
	f, err := os.OpenFile(s.journalPath(), os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("state: %w", err)
	}
	s.f, s.size, s.dirty = f, int64(len(buf)), false
	return nil
}

// deadLetters is a file of JSON lines, one per event given up on, appended and fsynced.
type deadLetters struct {
	f *os.File
}

func openDeadLetters(path string) (*deadLetters, error) {
	_, statErr := os.Stat(path)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("dead-letter file: %w", err)
	}
	// A line torn by a crash would swallow the next one: start on a line of our own.
	if st, err := f.Stat(); err == nil && st.Size() > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, st.Size()-1); err == nil && last[0] != '\n' {
			if _, err := f.Write([]byte{'\n'}); err != nil {
				f.Close()
				return nil, fmt.Errorf("dead-letter file: %w", err)
			}
		}
	}
	if errors.Is(statErr, fs.ErrNotExist) {
		if err := atomicfile.SyncDir(filepath.Dir(path)); err != nil {
			f.Close()
			return nil, fmt.Errorf("dead-letter file: %w", err)
		}
	}
	return &deadLetters{f: f}, nil
}

func (d *deadLetters) write(b []byte) error {
	if _, err := d.f.Write(b); err != nil {
		return fmt.Errorf("dead-letter file: %w", err)
	}
	if err := d.f.Sync(); err != nil {
		return fmt.Errorf("dead-letter file: %w", err)
	}
	return nil
}

func (d *deadLetters) close() error { return d.f.Close() }
