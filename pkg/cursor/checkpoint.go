package cursor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/evtctl/evtctl/internal/atomicfile"
)

// Checkpoint records how far a consumer got. It is written only after the output for the
// events up to Cursor has been flushed, so a crash never records an event that was not
// written out: a restart resumes with nothing lost (delivery is at-least-once; events after
// the last checkpoint may be written again).
//
// A consumer that has not read an event yet records where it starts, so that stopping it
// before the first event loses nothing: the head's cursor, or the cursor it was told to start
// after; Since, with no cursor, when it was told to start at a time; neither (the empty
// cursor, before the start of any log) when it starts at the log's oldest event, or on a log
// that has never held one.
type Checkpoint struct {
	Cursor string    `json:"cursor"`
	Since  time.Time `json:"since,omitzero"` // only with an empty Cursor
	Node   string    `json:"node,omitempty"`
	Query  string    `json:"query,omitempty"`
	// Log names the log at Cursor, where its source can tell one log from another (a
	// chain's id and the hash of the block at the cursor's height): a checkpoint is not
	// resumed against another log.
	Log     json.RawMessage `json:"log,omitempty"`
	Updated time.Time       `json:"updated"`
}

// AtStart reports whether cp is at the log's start: the consumer resumes at the oldest event
// the log holds.
func (cp Checkpoint) AtStart() bool { return cp.Cursor == "" && cp.Since.IsZero() }

// LoadCheckpoint reads a checkpoint file. ok is false when the file does not exist. A file
// holding just a cursor (as `echo CURSOR > file` makes) is accepted too. Whether the cursor
// is one of the log's is for the reader of that log to say.
func LoadCheckpoint(path string) (cp Checkpoint, ok bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Checkpoint{}, false, nil
	}
	if err != nil {
		return Checkpoint{}, false, err
	}
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] != '{' {
		cp.Cursor = string(b)
	} else if err := json.Unmarshal(b, &cp); err != nil {
		return Checkpoint{}, false, fmt.Errorf("checkpoint %s is not a checkpoint file: %w", path, err)
	}
	if cp.Cursor != "" {
		cp.Since = time.Time{} // the cursor is the position
	}
	return cp, true, nil
}

// SaveCheckpoint writes cp atomically: a temporary file beside path, fsynced, renamed over
// path, and the directory fsynced, so a crash leaves the old checkpoint or the new one.
func SaveCheckpoint(path string, cp Checkpoint) error {
	b, err := json.Marshal(cp)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(path, append(b, '\n')); err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	return nil
}
