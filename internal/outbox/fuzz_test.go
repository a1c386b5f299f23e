package outbox

import (
	"bytes"
	"testing"
)

// FuzzParseEntry: reading an entry file never panics, and what it accepts it accepts whole;
// an entry Put writes reads back as the same events.
func FuzzParseEntry(f *testing.F) {
	good, _ := encodeEntry([][]byte{ev("1"), ev("2")})
	f.Add(good)
	f.Add([]byte("evtctl-outbox v1 events=1 bytes=3 crc32c=00000000\n{}\n"))
	f.Add([]byte("evtctl-outbox v1 events=0 bytes=0 crc32c=00000000\n"))
	f.Add([]byte(""))
	f.Add([]byte("evtctl-outbox v1 events=1 bytes=4 crc32c=bc2566f1\n{ }\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		events, problem := parseEntry(data)
		if problem != "" {
			if events != nil {
				t.Fatalf("events %q with a problem %q", events, problem)
			}
			return
		}
		if len(events) == 0 {
			t.Fatal("accepted an entry with no events")
		}
		again, err := encodeEntry(events)
		if err != nil {
			t.Fatalf("accepted events that cannot be stored again: %v", err)
		}
		back, problem := parseEntry(again)
		if problem != "" || len(back) != len(events) {
			t.Fatalf("re-encoded entry: %q, %d events, want %d", problem, len(back), len(events))
		}
		for i := range back {
			var want bytes.Buffer
			compact(&want, events[i]) // Put stores events compact
			if !bytes.Equal(back[i], want.Bytes()) {
				t.Fatalf("event %d: %q, want %q", i, back[i], want.Bytes())
			}
		}
	})
}
