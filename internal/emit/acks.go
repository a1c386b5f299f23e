package emit

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"sync"

	"github.com/tidwall/gjson"

	"github.com/evtctl/evtctl/internal/deliver"
)

// Acks writes a line for each event a receiver accepted, and counts them. The lines are a
// by-product of sending: when their reader has gone (emit | head -1), they are dropped from
// then on, and the sending goes on (Close says whether that happened).
type Acks struct {
	json     bool
	safe     func(string) string
	gone     func(error) bool
	progress func(n int)

	mu         sync.Mutex // guards out, outGone, line, the counts and calls of progress
	out        *bufio.Writer
	outGone    bool
	line       []byte // ReportBatch's buffer
	sent, dups int
	requests   int // batches delivered
}

// AckOptions says how Acks writes its lines.
type AckOptions struct {
	// JSON writes each line as an Ack in JSON; else as text.
	JSON bool
	// Safe makes text from the receiver (an id) safe to print; nil: as it is.
	Safe func(string) string
	// Gone reports a write error that means the lines' reader has gone; nil: none does.
	Gone func(error) bool
	// Progress, when set, is told of each event accepted.
	Progress func(n int)
}

// NewAcks returns an Acks that writes to w.
func NewAcks(w io.Writer, o AckOptions) *Acks {
	a := &Acks{json: o.JSON, safe: o.Safe, gone: o.Gone, progress: o.Progress, out: bufio.NewWriter(w)}
	if a.safe == nil {
		a.safe = func(s string) string { return s }
	}
	if a.gone == nil {
		a.gone = func(error) bool { return false }
	}
	if a.progress == nil {
		a.progress = func(int) {}
	}
	return a
}

// EventID returns the id of a CloudEvent in JSON.
func EventID(ev []byte) string { return gjson.GetBytes(ev, "id").String() }

// Report writes a line for each event the receiver accepted.
func (a *Acks) Report(events [][]byte, res []deliver.Result) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.progress(len(res))
	for i, r := range res {
		a.sent++
		if r.Duplicate {
			a.dups++
		}
		if a.outGone {
			continue
		}
		id := EventID(events[i])
		if a.json {
			b, _ := json.Marshal(Ack{ID: id, Cursor: r.Cursor, Duplicate: r.Duplicate, Status: r.Status})
			a.out.Write(append(b, '\n'))
		} else {
			line := "sent " + id
			if r.Status != 0 {
				line += fmt.Sprintf(" (%d)", r.Status)
			}
			if r.Cursor != "" {
				line += " at " + r.Cursor
			}
			if r.Duplicate {
				line += ", a duplicate of an event already there"
			}
			fmt.Fprintln(a.out, line)
		}
	}
	return a.write(nil)
}

// ReportBatch writes a line for each event of b from the first that the receiver
// accepted, as Report does, and counts a request.
func (a *Acks) ReportBatch(b *Batch, first int, res []deliver.Result) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.progress(len(res))
	a.requests++
	buf := a.line[:0]
	for k, r := range res {
		i := first + k
		a.sent++
		if r.Duplicate {
			a.dups++
		}
		if a.outGone {
			continue
		}
		id := b.ID(i)
		if a.json {
			buf = AppendAckJSON(buf, id, r)
		} else {
			buf = append(buf, "sent "...)
			buf = append(buf, a.safe(IDString(id))...)
			buf = append(buf, " ("...)
			buf = strconv.AppendInt(buf, int64(r.Status), 10)
			buf = append(buf, ')')
			if r.Cursor != "" {
				buf = append(buf, " at "...)
				buf = append(buf, r.Cursor...)
			}
			if r.Duplicate {
				buf = append(buf, ", a duplicate of an event already there"...)
			}
			buf = append(buf, '\n')
		}
		if len(buf) >= 32<<10 {
			if err := a.write(buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
	}
	a.line = buf[:0]
	return a.write(buf)
}

// ReportOne counts one event accepted and writes the line that line makes of it, given
// whether lines are JSON, unless the lines' reader has gone. Write errors other than a
// reader gone are dropped.
func (a *Acks) ReportOne(line func(json bool) []byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sent++
	a.progress(1)
	if a.outGone {
		return
	}
	_ = a.write(line(a.json))
}

// write writes b and what out holds; a.mu is held.
func (a *Acks) write(b []byte) error {
	if a.outGone {
		return nil
	}
	_, err := a.out.Write(b)
	if err == nil {
		err = a.out.Flush()
	}
	if err != nil && a.gone(err) {
		a.outGone = true
		return nil
	}
	return err
}

// Close writes what is left of the lines, and reports whether their reader went away
// before they were all written.
func (a *Acks) Close() (gone bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	_ = a.write(nil)
	return a.outGone
}

// Counts returns how many events the receiver has accepted so far, how many of them it
// already had, and how many batches it took.
func (a *Acks) Counts() (sent, duplicates, requests int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sent, a.dups, a.requests
}
