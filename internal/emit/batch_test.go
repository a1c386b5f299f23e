package emit

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/evtctl/evtctl/internal/deliver"
	"github.com/evtctl/evtctl/internal/eventgen"
)

// testEvent is a CloudEvent with the id given, of about size bytes.
func testEvent(id string, size int) []byte {
	head := `{"specversion":"1.0","id":"` + id + `","source":"/test/file","type":"org.example.file.line.v1","time":"2026-11-22T10:00:00Z","data":{"pad":"`
	tail := `"}}`
	return []byte(head + strings.Repeat("x", max(0, size-len(head)-len(tail))) + tail)
}

// The line of an accepted event is what json.Marshal makes of it, also where the id or the
// cursor needs escaping.
func TestAppendResultJSON(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"a-1", "", `q"uote`, `back\slash`, "<html>&", "é", "\u2028", "tab\t", "\x7f"} {
		for _, r := range []deliver.Result{{Status: 200, Cursor: "18ea6461241d1dcb-0000000000000001"}, {Status: 202}, {Status: 200, Cursor: "c<1>", Duplicate: true}} {
			text, _ := json.Marshal(id)
			l, err := eventgen.Inspect([]byte(`{"id":` + string(text) + `}`))
			if err != nil {
				t.Fatal(err)
			}
			got := AppendAckJSON(nil, l.ID, r)
			want, _ := json.Marshal(Ack{ID: id, Cursor: r.Cursor, Duplicate: r.Duplicate, Status: r.Status})
			if string(got) != string(want)+"\n" {
				t.Errorf("id %q, %+v: %s, want %s", id, r, got, want)
			}
		}
	}
}

// Batches hold as many events as fit in the bytes allowed, at most the events allowed; an
// event larger than the bytes allowed goes alone.
func TestBatchSizing(t *testing.T) {
	t.Parallel()
	sz := Sizing{Events: 4, Bytes: 1000}
	var b Batch
	b.Reset()
	ev := func(size int) ([]byte, eventgen.Line) {
		e := testEvent("x", size)
		l, err := eventgen.Inspect(e)
		if err != nil {
			t.Fatal(err)
		}
		return e, l
	}
	var sizes []int
	for _, size := range []int{300, 300, 300, 300, 1500, 200, 200, 200, 200, 200} {
		e, l := ev(size)
		if !b.Fits(sz, len(e)) {
			sizes = append(sizes, b.N())
			if len(b.Request(0, b.N())) > sz.Bytes && b.N() > 1 {
				t.Errorf("a batch of %d events is %d bytes", b.N(), len(b.body))
			}
			b.Reset()
		}
		b.Add(e, l, 0)
		if b.Full(sz) {
			sizes = append(sizes, b.N())
			b.Reset()
		}
	}
	sizes = append(sizes, b.N())
	if fmt.Sprint(sizes) != "[3 1 1 4 1]" {
		t.Errorf("batches of %v events, want [3 1 1 4 1]", sizes)
	}
	e, l := ev(200)
	b.Reset()
	b.Add(e, l, 7)
	b.Add(e, l, 8)
	if got := b.Request(1, 2); string(got) != "["+string(e)+"]" || string(b.ID(1)) != `"x"` {
		t.Errorf("request(1, 2) = %s", got)
	}
}
