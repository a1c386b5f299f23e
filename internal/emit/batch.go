// Package emit is the engine of evtctl emit. It makes a run's events from templates
// (TemplateEvents) or reads them from JSON lines (FileEvents, Batcher.Lines), gathers them
// into requests (Batch), and sends them: over HTTP through internal/deliver, in ordered or
// concurrent batches or one event a request (Run, with a sender from NewSender); to a
// Kafka topic (RunKafka); or to a Redis stream (RunRedis). Acks writes the line of each
// event a receiver accepted and counts them. The command line, the spool and the wording
// of failures belong to evtctl emit.
package emit

import (
	"context"
	"encoding/json"
	"io"
	"strconv"
	"time"

	"github.com/evtctl/evtctl/internal/deliver"
	"github.com/evtctl/evtctl/internal/eventgen"
	"github.com/evtctl/evtctl/internal/jsonspace"
)

// Batches, unless a batch size says how many events go in one: as many events as fit in
// DefaultBatchBytes, at most DefaultBatchEvents.
const (
	DefaultBatchBytes  = 1 << 20
	DefaultBatchEvents = 4096
	// Linger is how long an event read waits for more to join its batch when no more
	// input is ready (a slow producer on stdin): then what was read is sent. A regular
	// file is always ready: its batches are always full.
	Linger = 50 * time.Millisecond
	// ReadBlockSize is how much of the input is read at once.
	ReadBlockSize = 256 << 10
	// MaxLine is the longest line of input.
	MaxLine = 1 << 20
)

// Sizing says when a batch is full.
type Sizing struct {
	Events int // at most this many events
	Bytes  int // when above 0: at most this many bytes of body, unless one event is larger
}

// idSpan is where an id is in a batch body.
type idSpan struct{ start, end int }

// Batch is the events of one request, encoded as its body. The zero Batch must be Reset
// before use.
type Batch struct {
	body   []byte   // '[' and the events, separated by ','; the ']' is added when it is sent
	sealed bool     // body ends with the ']'
	ends   []int    // where each event ends in body
	ids    []idSpan // the text of each event's id in body, quotes included; empty when it has none
	nums   []int    // each event's number (its line of input, or its place in the run)
}

// Reset empties b.
func (b *Batch) Reset() {
	b.body, b.sealed = append(b.body[:0], '['), false
	b.ends, b.ids, b.nums = b.ends[:0], b.ids[:0], b.nums[:0]
}

// N returns how many events b holds.
func (b *Batch) N() int { return len(b.ends) }

// Fits reports whether an event of size bytes fits in the batch.
func (b *Batch) Fits(s Sizing, size int) bool {
	if b.N() == 0 {
		return true
	}
	return b.N() < s.Events && (s.Bytes <= 0 || len(b.body)+1+size+1 <= s.Bytes)
}

// Full reports whether no further event fits.
func (b *Batch) Full(s Sizing) bool {
	return b.N() >= s.Events || s.Bytes > 0 && len(b.body)+3 > s.Bytes
}

// Add appends an event, whose id Inspect found in l, with its number.
func (b *Batch) Add(ev []byte, l eventgen.Line, num int) {
	if b.N() > 0 {
		b.body = append(b.body, ',')
	}
	start := len(b.body)
	b.body = append(b.body, ev...)
	id := idSpan{}
	if l.ID != nil {
		id = idSpan{start + l.IDAt, start + l.IDAt + len(l.ID)}
	}
	b.ends, b.ids, b.nums = append(b.ends, len(b.body)), append(b.ids, id), append(b.nums, num)
}

// Event returns event i.
func (b *Batch) Event(i int) []byte {
	start := 1
	if i > 0 {
		start = b.ends[i-1] + 1
	}
	return b.body[start:b.ends[i]]
}

// ID returns the JSON text of event i's id, quotes included; empty when it has none.
func (b *Batch) ID(i int) []byte {
	return b.body[b.ids[i].start:b.ids[i].end]
}

// Num returns event i's number.
func (b *Batch) Num(i int) int { return b.nums[i] }

// Request returns the body of a request with events lo to hi-1.
func (b *Batch) Request(lo, hi int) []byte {
	if lo == 0 && hi == b.N() {
		if !b.sealed {
			b.body, b.sealed = append(b.body, ']'), true
		}
		return b.body
	}
	body := make([]byte, 0, b.ends[hi-1]-b.ends[lo]+2)
	body = append(body, '[')
	for i := lo; i < hi; i++ {
		if i > lo {
			body = append(body, ',')
		}
		body = append(body, b.Event(i)...)
	}
	return append(body, ']')
}

// Pool recycles batches, whose buffers are large.
type Pool chan *Batch

// Get returns an empty batch.
func (p Pool) Get() *Batch {
	select {
	case b := <-p:
		b.Reset()
		return b
	default:
		b := &Batch{}
		b.Reset()
		return b
	}
}

// Put returns b to the pool, unless it is full.
func (p Pool) Put(b *Batch) {
	select {
	case p <- b:
	default:
	}
}

// Block is a piece of input read by ReadBlocks.
type Block struct {
	B   []byte
	Err error // io.EOF at the end
}

// ReadBlocks reads r in blocks of buffers from free until it fails or ends, or ctx ends. A
// read that blocks (stdin) holds up only this goroutine.
func ReadBlocks(ctx context.Context, r io.Reader, blocks chan<- Block, free chan []byte) {
	for {
		var buf []byte
		select {
		case buf = <-free:
		case <-ctx.Done():
			return
		}
		n, err := r.Read(buf[:cap(buf)])
		if n == 0 && err == nil {
			free <- buf
			continue
		}
		select {
		case blocks <- Block{B: buf[:n], Err: err}:
		case <-ctx.Done():
			return
		}
		if err != nil {
			return
		}
	}
}

// TrimJSONSpace returns b without the JSON white space at either end.
func TrimJSONSpace(b []byte) []byte {
	i, j := 0, len(b)
	for i < j && jsonspace.Is(b[i]) {
		i++
	}
	for j > i && jsonspace.Is(b[j-1]) {
		j--
	}
	return b[i:j]
}

// Ack is the JSON line written for an event the receiver accepted.
type Ack struct {
	ID        string `json:"id"`
	Cursor    string `json:"cursor,omitempty"`
	Duplicate bool   `json:"duplicate,omitempty"`
	Status    int    `json:"status,omitempty"` // HTTP's; none for a Redis stream
}

// IDString returns the id whose JSON text is id ("" for none).
func IDString(id []byte) string {
	return eventgen.Line{ID: id}.IDString()
}

// AppendAckJSON appends the JSON line of an accepted event whose id has the JSON text id:
// what json.Marshal makes of its Ack, without its cost when the id and the cursor need no
// escaping.
func AppendAckJSON(buf, id []byte, r deliver.Result) []byte {
	if len(id) < 2 || !plainJSON(id[1:len(id)-1]) || !plainJSON(r.Cursor) {
		b, _ := json.Marshal(Ack{ID: IDString(id), Cursor: r.Cursor, Duplicate: r.Duplicate, Status: r.Status})
		return append(append(buf, b...), '\n')
	}
	buf = append(buf, `{"id":`...)
	buf = append(buf, id...)
	if r.Cursor != "" {
		buf = append(buf, `,"cursor":"`...)
		buf = append(buf, r.Cursor...)
		buf = append(buf, '"')
	}
	if r.Duplicate {
		buf = append(buf, `,"duplicate":true`...)
	}
	buf = append(buf, `,"status":`...)
	buf = strconv.AppendInt(buf, int64(r.Status), 10)
	return append(buf, "}\n"...)
}

// plainJSON reports whether json.Marshal writes s in a string as it is: printable ASCII
// but '"', '\\', '<', '>' and '&'.
func plainJSON[T string | []byte](s T) bool {
	for i := 0; i < len(s); i++ {
		if !jsonPlain[s[i]] {
			return false
		}
	}
	return true
}

var jsonPlain = func() (t [256]bool) {
	for c := 0x20; c < 0x7f; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()
