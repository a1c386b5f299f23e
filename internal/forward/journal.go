package forward

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/evtctl/evtctl/internal/atomicfile"
)

// The journal is a text file: a header line, then one record per line, each a CRC-32C (8 hex
// digits) of its JSON, a space and the JSON:
//
//	evtctl-forward-journal v1
//	1a2b3c4d {"op":"retry","cursor":"…","tier":1,"attempts":1,"due":"…","status":503,"event":{…}}
//	5e6f7a8b {"op":"done","cursor":"…"}
//
// "retry" puts an event in the retry store or moves it to another tier (the event's bytes are
// in its first retry record only); "done" says an event was delivered or dead-lettered, and
// takes it out of the store. Records are appended and fsynced; an append cut short by a crash
// leaves a torn last line, which loading drops.
const journalHeader = "evtctl-forward-journal v1\n"

// Limits of a journal record.
const (
	maxCursorLen = 256
	maxTier      = 1 << 16
	maxReasonLen = 1024
)

// Record ops.
const (
	opRetry = "retry"
	opDone  = "done"
)

// record is one line of the journal.
type record struct {
	Op       string          `json:"op"`
	Cursor   string          `json:"cursor"`
	Tier     int             `json:"tier,omitempty"`
	Attempts int             `json:"attempts,omitempty"`
	Due      time.Time       `json:"due,omitzero"`
	Status   int             `json:"status,omitempty"`
	Reason   string          `json:"reason,omitempty"`
	Event    json.RawMessage `json:"event,omitempty"`
}

// appendRecord appends the journal line of r to b.
func appendRecord(b []byte, r *record) ([]byte, error) {
	js, err := json.Marshal(r)
	if err != nil {
		return b, err
	}
	b = fmt.Appendf(b, "%08x ", atomicfile.CRC32C(js))
	b = append(b, js...)
	return append(b, '\n'), nil
}

// decodeLine reads one journal line, without its newline.
func decodeLine(line []byte) (*record, error) {
	if len(line) < 10 || line[8] != ' ' {
		return nil, errors.New("not a record line")
	}
	sum, err := strconv.ParseUint(string(line[:8]), 16, 32)
	if err != nil {
		return nil, errors.New("not a record line")
	}
	js := line[9:]
	if uint32(sum) != atomicfile.CRC32C(js) {
		return nil, errors.New("checksum mismatch")
	}
	var r record
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("bad record: %w", err)
	}
	if dec.More() {
		return nil, errors.New("bad record: trailing data")
	}
	if err := r.check(); err != nil {
		return nil, err
	}
	return &r, nil
}

// check validates a decoded record.
func (r *record) check() error {
	switch r.Op {
	case opRetry, opDone:
	default:
		return fmt.Errorf("unknown op %q", r.Op)
	}
	if r.Cursor == "" || len(r.Cursor) > maxCursorLen || !utf8.ValidString(r.Cursor) {
		return errors.New("bad cursor")
	}
	for i := 0; i < len(r.Cursor); i++ {
		if r.Cursor[i] < 0x21 || r.Cursor[i] == 0x7f {
			return errors.New("bad cursor")
		}
	}
	if r.Tier < 0 || r.Tier > maxTier || r.Attempts < 0 || r.Status < 0 || r.Status > 999 || len(r.Reason) > maxReasonLen {
		return errors.New("a field is out of range")
	}
	if r.Event != nil {
		ev := bytes.TrimSpace(r.Event)
		if len(ev) == 0 || ev[0] != '{' {
			return errors.New("the event is not a JSON object")
		}
	}
	if r.Op == opDone && (r.Event != nil || r.Tier != 0 || r.Attempts != 0 || !r.Due.IsZero()) {
		return errors.New("a done record with retry fields")
	}
	return nil
}

// entry is an event in the retry store.
type entry struct {
	Cursor   string
	Tier     int
	Attempts int
	Due      time.Time
	Status   int
	Reason   string
	Event    []byte
}

// journalState is what a journal holds once its records are applied.
type journalState struct {
	live map[string]*entry // the retry store, by cursor
	done map[string]bool   // events settled after being read
	size int64             // bytes of the events in live
}

func newJournalState() *journalState {
	return &journalState{live: map[string]*entry{}, done: map[string]bool{}}
}

// apply applies one record. A retry record for an event the store does not hold must carry
// the event.
func (s *journalState) apply(r *record) error {
	switch r.Op {
	case opDone:
		if e := s.live[r.Cursor]; e != nil {
			s.size -= int64(len(e.Event))
			delete(s.live, r.Cursor)
		}
		s.done[r.Cursor] = true
	case opRetry:
		e := s.live[r.Cursor]
		if e == nil {
			if r.Event == nil {
				return fmt.Errorf("a retry record for %s, an event not in the store, without the event", r.Cursor)
			}
			e = &entry{Cursor: r.Cursor, Event: bytes.Clone(r.Event)}
			s.live[r.Cursor] = e
			s.size += int64(len(e.Event))
		}
		e.Tier, e.Attempts, e.Due, e.Status, e.Reason = r.Tier, r.Attempts, r.Due, r.Status, r.Reason
		delete(s.done, r.Cursor)
	}
	return nil
}

// decodeJournal reads a whole journal and returns its state and the length of its valid
// prefix. Records are fsynced one append at a time, so damage can only come from an append
// that a crash (or a power loss) cut short, which was never acknowledged: loading stops at
// the first line that is torn or fails its checks, and the caller cuts the file there.
// A file that does not start with the journal header is an error.
func decodeJournal(data []byte) (st *journalState, valid int, err error) {
	st = newJournalState()
	if len(data) == 0 {
		return st, 0, nil
	}
	if !bytes.HasPrefix(data, []byte(journalHeader)) {
		if len(data) < len(journalHeader) && bytes.HasPrefix([]byte(journalHeader), data) {
			return st, 0, nil // the header itself was torn
		}
		return nil, 0, errors.New("not a forward journal (bad header)")
	}
	off := len(journalHeader)
	for off < len(data) {
		nl := bytes.IndexByte(data[off:], '\n')
		if nl < 0 {
			break // a torn last line: no newline
		}
		r, err := decodeLine(data[off : off+nl])
		if err != nil || st.apply(r) != nil {
			break
		}
		off += nl + 1
	}
	return st, off, nil
}
