package emit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/evtctl/evtctl/internal/eventgen"
)

// lineEvent is the event of a line as emit makes it, without its defaults: none for a blank
// line.
func lineEvent(text []byte, _ int) ([]byte, eventgen.Line, error) {
	text = TrimJSONSpace(text)
	if len(text) == 0 {
		return nil, eventgen.Line{}, nil
	}
	l, err := eventgen.Inspect(text)
	return text, l, err
}

// batchLines runs Lines over input with batches of at most two events, and returns each
// batch handed over as its ids and line numbers, and what Lines returned.
func batchLines(t *testing.T, r io.Reader) ([]string, error) {
	t.Helper()
	out := make(chan *Batch)
	b := NewBatcher(Sizing{Events: 2}, out, make(Pool, 2))
	done := make(chan error, 1)
	go func() {
		defer close(out)
		done <- b.Lines(context.Background(), r, lineEvent)
	}()
	var got []string
	for bt := range out {
		var s []string
		for i := range bt.N() {
			s = append(s, fmt.Sprintf("%s@%d", IDString(bt.ID(i)), bt.Num(i)))
		}
		got = append(got, strings.Join(s, " "))
	}
	return got, <-done
}

// Lines numbers the lines of the input as read, across reads of any size, skips blank ones
// and hands over the last batch, full or not.
func TestBatcherLines(t *testing.T) {
	t.Parallel()
	in := "{\"id\":\"a\"}\n\n  {\"id\":\"b\"}\n{\"id\":\"c\"}\r\n{\"id\":\"d\"}\n{\"id\":\"e\"}"
	for name, r := range map[string]io.Reader{"whole": strings.NewReader(in), "byte by byte": iotest.OneByteReader(strings.NewReader(in))} {
		got, err := batchLines(t, r)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if want := "a@1 b@3 | c@4 d@5 | e@6"; strings.Join(got, " | ") != want {
			t.Errorf("%s: batches %v, want %s", name, got, want)
		}
	}
}

// A line longer than MaxLine stops the reading; the events before it are handed over.
func TestBatcherLineTooLong(t *testing.T) {
	t.Parallel()
	long := `{"id":"x","pad":"` + strings.Repeat("p", MaxLine) + `"}`
	in := "{\"id\":\"a\"}\n{\"id\":\"b\"}\n{\"id\":\"c\"}\n" + long + "\n{\"id\":\"d\"}\n"
	got, err := batchLines(t, bytes.NewReader([]byte(in)))
	var le *LineTooLongError
	if !errors.As(err, &le) || le.Line != 4 {
		t.Fatalf("Lines returned %v, want line 4 too long", err)
	}
	if want := "--file line 4 is longer than 1048576 bytes"; err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
	if want := "a@1 b@2 | c@3"; strings.Join(got, " | ") != want {
		t.Errorf("batches %v, want %s", got, want)
	}
}
