package bench

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	"github.com/evtctl/evtctl/internal/eventgen"
)

// The events a bench sends: OEP-41 course enrollments, as an Open edX LMS emits them, padded
// to the size asked for. One in RareEvery is a deactivation: the replay bench's filter
// selects exactly those.
const (
	CommonType = "org.openedx.learning.course.enrollment.created.v1"
	RareType   = "org.openedx.learning.course.enrollment.deactivated.v1"
	RareEvery  = 100
	// DefaultEventSize is the size of an event in JSON format unless another is asked for.
	DefaultEventSize = 562
	eventSource      = "/openedx/lms/web"
	seqDigits        = 16
)

// eventMaker makes distinct events of one size cheaply: each kind is built once by eventgen
// with a placeholder id, and each event is a copy whose id digits are overwritten.
type eventMaker struct {
	runID  string
	size   int
	common template
	rare   template
}

type template struct {
	json  []byte
	idOff int // where the sequence digits of the id start
}

// newEventMaker prepares events of exactly size bytes whose ids are "<runID>-<16 hex digits>".
func newEventMaker(size int, runID string) (*eventMaker, error) {
	m := &eventMaker{runID: runID, size: size}
	var err error
	if m.common, err = makeTemplate(CommonType, size, runID); err != nil {
		return nil, err
	}
	if m.rare, err = makeTemplate(RareType, size, runID); err != nil {
		return nil, err
	}
	return m, nil
}

// MinEventSize is the smallest event size the benches can make.
func MinEventSize() int {
	t, err := buildEvent(RareType, strings.Repeat("0", 8), 0)
	if err != nil {
		return 0
	}
	return len(t)
}

func makeTemplate(typ string, size int, runID string) (template, error) {
	base, err := buildEvent(typ, runID, 0)
	if err != nil {
		return template{}, err
	}
	minSize, _ := buildEvent(RareType, runID, 0)
	if size < len(minSize) {
		return template{}, fmt.Errorf("an event must be at least %d bytes in JSON format, got %d", len(minSize), size)
	}
	js, err := buildEvent(typ, runID, size-len(base))
	if err != nil {
		return template{}, err
	}
	if len(js) != size {
		return template{}, fmt.Errorf("made an event of %d bytes, not %d", len(js), size)
	}
	ph := []byte(`"id":"` + runID + "-" + strings.Repeat("0", seqDigits) + `"`)
	i := bytes.Index(js, ph)
	if i < 0 {
		return template{}, fmt.Errorf("event has no id placeholder")
	}
	return template{json: js, idOff: i + len(`"id":"`) + len(runID) + 1}, nil
}

// buildEvent makes one enrollment event with pad bytes of padding in its data.
func buildEvent(typ, runID string, pad int) ([]byte, error) {
	data := `{"user":{"id":4242,"username":"learner-4242","is_active":true},` +
		`"course":{"course_key":"course-v1:edX+DemoX+Demo_Course","display_name":"Demonstration Course"},` +
		`"mode":"audit","is_active":true,"creation_date":"2026-11-22T10:00:00Z"`
	data += `,"pad":"` + strings.Repeat("x", pad) + `"}`
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	g, err := eventgen.New(eventgen.Spec{
		Type:    typ,
		Source:  eventSource,
		ID:      runID + "-" + strings.Repeat("0", seqDigits),
		Subject: "course-v1:edX+DemoX+Demo_Course",
		Data:    data,
	}, func() time.Time { return at })
	if err != nil {
		return nil, err
	}
	return g.Event(1)
}

// rare reports whether event seq is one the replay filter selects.
func rare(seq uint64) bool { return seq%RareEvery == 0 }

// appendEvent appends event number seq (from 1) to dst.
func (m *eventMaker) appendEvent(dst []byte, seq uint64) []byte {
	t := &m.common
	if rare(seq) {
		t = &m.rare
	}
	n := len(dst)
	dst = append(dst, t.json...)
	putHex(dst[n+t.idOff:n+t.idOff+seqDigits], seq)
	return dst
}

// id is the id of event seq.
func (m *eventMaker) id(seq uint64) string {
	var b [seqDigits]byte
	putHex(b[:], seq)
	return m.runID + "-" + string(b[:])
}

// seqOf returns the sequence number of an id this maker made.
func (m *eventMaker) seqOf(id string) (uint64, bool) {
	if len(id) != len(m.runID)+1+seqDigits || !strings.HasPrefix(id, m.runID) || id[len(m.runID)] != '-' {
		return 0, false
	}
	var v uint64
	for _, c := range id[len(m.runID)+1:] {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | uint64(c-'0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | uint64(c-'a'+10)
		default:
			return 0, false
		}
	}
	return v, true
}

// appendBatch appends the events first..first+n-1 as a JSON array.
func (m *eventMaker) appendBatch(dst []byte, first uint64, n int) []byte {
	dst = append(dst, '[')
	for i := range n {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = m.appendEvent(dst, first+uint64(i))
	}
	return append(dst, ']')
}

func putHex(dst []byte, v uint64) {
	const digits = "0123456789abcdef"
	for i := len(dst) - 1; i >= 0; i-- {
		dst[i] = digits[v&0xf]
		v >>= 4
	}
}
