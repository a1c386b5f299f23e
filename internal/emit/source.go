package emit

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"time"

	"github.com/evtctl/evtctl/internal/cevent"
	"github.com/evtctl/evtctl/internal/eventgen"
)

// FileEvents yields the events of the JSON lines of r, one at a time, each with its line
// number: event makes the event of a line (nil for a blank one; see Config.Event). The
// error is io.EOF when there are no more.
func FileEvents(r io.Reader, event func(text []byte, num int) ([]byte, eventgen.Line, error)) func() ([]byte, int, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), MaxLine)
	line := 0
	return func() ([]byte, int, error) {
		for sc.Scan() {
			line++
			ev, _, err := event(sc.Bytes(), line)
			if err != nil {
				return nil, line, err
			}
			if ev != nil {
				return bytes.Clone(ev), line, nil
			}
		}
		if err := sc.Err(); err != nil {
			return nil, line, fmt.Errorf("--file: %w", err)
		}
		return nil, line, io.EOF
	}
}

// Template is events made from templates (see eventgen).
type Template struct {
	Spec  eventgen.Spec
	Count int // how many; 0: no end
	Now   func() time.Time
	// Check, when set, looks at each event once it is known to be a valid CloudEvent;
	// its error stops the events.
	Check func(n int, ev []byte) error
}

// TemplateEvents returns the events of t, one at a time, each with its number (1, 2, …),
// checked as a node would check them: an event that is not valid is an *InputError. The
// error is io.EOF when there are no more.
func TemplateEvents(t Template) (func() ([]byte, int, error), error) {
	g, err := eventgen.New(t.Spec, t.Now)
	if err != nil {
		return nil, &InputError{err}
	}
	seq := 0
	return func() ([]byte, int, error) {
		if seq == t.Count && t.Count > 0 {
			return nil, seq, io.EOF
		}
		seq++
		b, err := g.Event(seq)
		if err != nil {
			return nil, seq, &InputError{err}
		}
		if _, err := cevent.DecodeStructured(b, cevent.Limits{}); err != nil {
			return nil, seq, &InputError{fmt.Errorf("event %d is not a valid CloudEvent: %v", seq, err)}
		}
		if t.Check != nil {
			if err := t.Check(seq, b); err != nil {
				return nil, seq, err
			}
		}
		return b, seq, nil
	}, nil
}
