// Package outbox is a durable spool of CloudEvents batches written before they are sent (a transactional outbox).
//
// Each batch is one file in the spool directory, written atomically and
// durably (atomicfile.Write: a synced temporary file renamed into place, then
// the directory synced). A file holds a header line with the event count, the payload
// length and a CRC-32C of the payload, then one compact JSON event per
// line:
//
//	evtctl-outbox v1 events=2 bytes=1234 crc32c=1a2b3c4d
//	{"specversion":"1.0",...}
//	{"specversion":"1.0",...}
//
// Delivery is at least once: an entry is removed (Done) only after the
// target accepted it, so a crash between the two resends it; stable event
// ids make that harmless against a receiver's duplicate suppression.
//
// Events a receiver refused for themselves can be moved to the spool's
// dead-letter file (AddDeadLetters), JSON lines beside the entries, so that
// they neither block the others nor vanish.
package outbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/evtctl/evtctl/internal/atomicfile"
)

const (
	entrySuffix = ".entry"
	badSuffix   = ".bad"
	// An interrupted Put of an earlier version left files named put-*.tmp.
	oldTempPrefix = "put-"
	oldTempSuffix = ".tmp"
	lockName      = ".lock"
	magic         = "evtctl-outbox"
	version       = "v1"
)

var (
	// ErrLocked is returned by Open when another Spool, in this process or
	// another, has the directory open.
	ErrLocked = errors.New("the spool is in use by another process")
	// ErrCorrupt is wrapped by the error of Entry.Events for an entry that
	// failed its checks; the file has been moved aside with a ".bad" suffix.
	ErrCorrupt = errors.New("corrupt spool entry")
	// ErrClosed is returned by the methods of a closed Spool.
	ErrClosed = errors.New("the spool is closed")
)

// Spool is an open spool directory, locked for the exclusive use of one
// Spool. Its methods are safe for concurrent use.
type Spool struct {
	dir  string
	lock *atomicfile.Lock

	mu     sync.Mutex
	seq    uint64 // last sequence number used
	closed bool
}

// Entry is one stored batch.
type Entry struct {
	// Name is the file name in the spool directory. Names sort in the
	// order the entries were put.
	Name string
	path string
}

// Open opens the spool in dir, creating the directory if needed, and locks
// it: a second Open of the same directory fails with ErrLocked until Close.
// Temporary files left by an interrupted Put are removed.
func Open(dir string) (*Spool, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	lock, err := atomicfile.TryLock(filepath.Join(dir, lockName))
	if errors.Is(err, atomicfile.ErrLocked) {
		return nil, fmt.Errorf("outbox: %s: %w", dir, ErrLocked)
	}
	if err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	s := &Spool{dir: dir, lock: lock}
	if err := s.recover(); err != nil {
		lock.Unlock()
		return nil, err
	}
	return s, nil
}

// recover removes temporary files and finds the last sequence number used,
// counting entries moved aside so that their names are never reused.
func (s *Spool) recover() error {
	if _, err := atomicfile.RemoveTemps(s.dir); err != nil {
		return fmt.Errorf("outbox: removing an unfinished write: %w", err)
	}
	des, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	for _, de := range des {
		name := de.Name()
		switch {
		case strings.HasPrefix(name, oldTempPrefix) && strings.HasSuffix(name, oldTempSuffix):
			if err := os.Remove(filepath.Join(s.dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("outbox: removing an unfinished write: %w", err)
			}
		default:
			if seq, ok := parseName(strings.TrimSuffix(name, badSuffix)); ok {
				s.seq = max(s.seq, seq)
			}
		}
	}
	return nil
}

// entryName returns the file name of sequence number seq.
func entryName(seq uint64) string {
	return fmt.Sprintf("%016x%s", seq, entrySuffix)
}

// parseName returns the sequence number of an entry's file name.
func parseName(name string) (uint64, bool) {
	hex, ok := strings.CutSuffix(name, entrySuffix)
	if !ok || len(hex) != 16 {
		return 0, false
	}
	seq, err := strconv.ParseUint(hex, 16, 64)
	return seq, err == nil
}

// Put durably stores a batch of events (each one CloudEvent in JSON
// format) before it is sent. When Put returns, the entry survives a crash.
func (s *Spool) Put(events [][]byte) (Entry, error) {
	data, err := encodeEntry(events)
	if err != nil {
		return Entry{}, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return Entry{}, ErrClosed
	}
	s.seq++
	name := entryName(s.seq)
	s.mu.Unlock()

	path := filepath.Join(s.dir, name)
	if err := atomicfile.Write(path, data); err != nil {
		return Entry{}, fmt.Errorf("outbox: %w", err)
	}
	return Entry{Name: name, path: path}, nil
}

// Rewrite replaces the events of entry e with events, atomically: those of a batch that are
// still to be sent once the others were accepted. The entry keeps its place in the order.
// With no events left it is the same as Done.
func (s *Spool) Rewrite(e Entry, events [][]byte) error {
	if len(events) == 0 {
		return s.Done(e)
	}
	if err := s.check(e); err != nil {
		return err
	}
	if _, err := os.Stat(e.path); err != nil {
		return fmt.Errorf("outbox: rewriting %s: %w", e.Name, err)
	}
	data, err := encodeEntry(events)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(e.path, data); err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	return nil
}

// encodeEntry returns the file content of an entry holding events.
func encodeEntry(events [][]byte) ([]byte, error) {
	if len(events) == 0 {
		return nil, errors.New("outbox: no events to store")
	}
	var payload bytes.Buffer
	for i, ev := range events {
		mark := payload.Len()
		if err := compact(&payload, ev); err != nil {
			return nil, fmt.Errorf("outbox: event %d: %w", i, err)
		}
		if payload.Bytes()[mark] != '{' {
			return nil, fmt.Errorf("outbox: event %d is not a JSON object", i)
		}
		payload.WriteByte('\n')
	}
	out := fmt.Appendf(nil, "%s %s events=%d bytes=%d crc32c=%08x\n",
		magic, version, len(events), payload.Len(), atomicfile.CRC32C(payload.Bytes()))
	return append(out, payload.Bytes()...), nil
}

// compact appends the compact form of the JSON value ev to buf, which it
// leaves as it was on error.
func compact(buf *bytes.Buffer, ev []byte) error {
	var b bytes.Buffer
	if err := json.Compact(&b, ev); err != nil {
		return err
	}
	if b.Len() == 0 {
		return errors.New("empty event")
	}
	buf.Write(b.Bytes())
	return nil
}

// Pending returns the stored entries, oldest first. Entries moved aside
// and temporary files are not listed.
func (s *Spool) Pending() ([]Entry, error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	des, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	var out []Entry
	for _, de := range des {
		if _, ok := parseName(de.Name()); ok && de.Type().IsRegular() {
			out = append(out, Entry{Name: de.Name(), path: filepath.Join(s.dir, de.Name())})
		}
	}
	slices.SortFunc(out, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Events reads and checks the entry's events. An entry that fails its
// checks (a bad header, length or checksum, or an event that is not a JSON
// object) is never returned in part: it is renamed to Name+".bad" and the
// error wraps ErrCorrupt.
func (e Entry) Events() ([][]byte, error) {
	if e.path == "" {
		return nil, errors.New("outbox: an Entry not obtained from a Spool")
	}
	data, err := os.ReadFile(e.path)
	if err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	events, problem := parseEntry(data)
	if problem == "" {
		return events, nil
	}
	bad := e.path + badSuffix
	if err := os.Rename(e.path, bad); err != nil {
		return nil, fmt.Errorf("outbox: %s: %w: %s (moving it aside failed: %v)", e.Name, ErrCorrupt, problem, err)
	}
	if err := atomicfile.SyncDir(filepath.Dir(e.path)); err != nil {
		return nil, fmt.Errorf("outbox: %s: %w: %s; moved aside to %s, but: %v", e.Name, ErrCorrupt, problem, bad, err)
	}
	return nil, fmt.Errorf("outbox: %s: %w: %s; moved aside to %s", e.Name, ErrCorrupt, problem, bad)
}

// parseEntry checks an entry file and splits it into events, or names
// its problem.
func parseEntry(data []byte) ([][]byte, string) {
	line, payload, ok := bytes.Cut(data, []byte{'\n'})
	if !ok {
		return nil, "no header line (a torn write?)"
	}
	f := strings.Fields(string(line))
	if len(f) != 5 || f[0] != magic || f[1] != version {
		return nil, fmt.Sprintf("unrecognised header %q", truncate(string(line), 80))
	}
	n, err1 := field(f[2], "events=", func(v string) (int, error) { return strconv.Atoi(v) })
	size, err2 := field(f[3], "bytes=", func(v string) (int, error) { return strconv.Atoi(v) })
	sum, err3 := field(f[4], "crc32c=", func(v string) (uint64, error) { return strconv.ParseUint(v, 16, 32) })
	if err := errors.Join(err1, err2, err3); err != nil || n <= 0 || size < 0 {
		return nil, fmt.Sprintf("bad header %q", truncate(string(line), 80))
	}
	if len(payload) != size {
		return nil, fmt.Sprintf("%d bytes of events, the header says %d (a torn write?)", len(payload), size)
	}
	if got := atomicfile.CRC32C(payload); uint64(got) != sum {
		return nil, fmt.Sprintf("checksum %08x, the header says %08x", got, sum)
	}
	if size == 0 || payload[size-1] != '\n' {
		return nil, "the events do not end with a newline"
	}
	lines := bytes.Split(payload[:size-1], []byte{'\n'})
	if len(lines) != n {
		return nil, fmt.Sprintf("%d events, the header says %d", len(lines), n)
	}
	for i, ev := range lines {
		if len(ev) == 0 || ev[0] != '{' || !json.Valid(ev) {
			return nil, fmt.Sprintf("event %d is not a JSON object", i)
		}
		lines[i] = ev[:len(ev):len(ev)]
	}
	return lines, ""
}

func field[T any](s, prefix string, parse func(string) (T, error)) (T, error) {
	v, ok := strings.CutPrefix(s, prefix)
	if !ok {
		var zero T
		return zero, fmt.Errorf("want %s", prefix)
	}
	return parse(v)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Done removes an entry after its events were accepted. Removing an entry
// that is already gone is not an error.
func (s *Spool) Done(e Entry) error {
	if err := s.check(e); err != nil {
		return err
	}
	if err := os.Remove(e.path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("outbox: %w", err)
	}
	if err := atomicfile.SyncDir(s.dir); err != nil {
		return fmt.Errorf("outbox: removing %s: %w", e.Name, err)
	}
	return nil
}

// check returns an error when the spool is closed or e is not one of its entries.
func (s *Spool) check(e Entry) error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if e.path == "" || filepath.Dir(e.path) != s.dir {
		return fmt.Errorf("outbox: entry %q is not in spool %s", e.Name, s.dir)
	}
	return nil
}

// Close releases the spool's lock. Closing twice is harmless.
func (s *Spool) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return s.lock.Unlock()
}

// DeadLetterName is the name of the dead-letter file in a spool directory.
const DeadLetterName = "dead-letter.jsonl"

// DeadLetter is one line of the dead-letter file: an event a receiver refused.
type DeadLetter struct {
	Time   time.Time       `json:"time"`
	Target string          `json:"target"`
	ID     string          `json:"id"`
	Status int             `json:"status"`
	Reason string          `json:"reason"`
	Event  json.RawMessage `json:"event"`
}

// DeadLetterPath returns the path of the spool's dead-letter file.
func (s *Spool) DeadLetterPath() string { return filepath.Join(s.dir, DeadLetterName) }

// AddDeadLetters appends dls to the dead-letter file and fsyncs it. Call it before Done or
// Rewrite takes the events out of their entry: a crash in between then leaves an event in
// both places, never in neither.
func (s *Spool) AddDeadLetters(dls []DeadLetter) error {
	if len(dls) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	var buf []byte
	for _, dl := range dls {
		b, err := json.Marshal(dl)
		if err != nil {
			return fmt.Errorf("outbox: dead letter of %q: %w", dl.ID, err)
		}
		buf = append(append(buf, b...), '\n')
	}
	path := s.DeadLetterPath()
	_, statErr := os.Stat(path)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	defer f.Close()
	// A line torn by a crash would swallow the next one: start on a line of our own.
	if st, err := f.Stat(); err == nil && st.Size() > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, st.Size()-1); err == nil && last[0] != '\n' {
			buf = append([]byte{'\n'}, buf...)
		}
	}
	if _, err := f.Write(buf); err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	if errors.Is(statErr, fs.ErrNotExist) {
		if err := atomicfile.SyncDir(s.dir); err != nil {
			return fmt.Errorf("outbox: %w", err)
		}
	}
	return f.Close()
}
