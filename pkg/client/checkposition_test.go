package client

import (
	"context"
	"strings"
	"testing"
)

func init() {
	// A log found behind an http address (as a CometBFT node is), and one reached only by
	// its own scheme (as a Kafka topic is), each with positions of its own.
	Register(Driver{Schemes: []string{"testfound"}, IsCursor: func(s string) bool { return strings.HasPrefix(s, "found:") },
		Detect: func(context.Context, string, Options) (Source, error) { return nil, nil }})
	Register(Driver{Schemes: []string{"testnamed"}, IsCursor: func(s string) bool { return strings.HasPrefix(s, "named:") }})
}

// Until a node at an http address has answered, a position of a log that may be found
// behind such an address is taken (the node may turn out to be one); a position of a log
// reached only by its own scheme, or no position at all, is refused at once.
func TestCheckPositionBeforeTheNodeAnswers(t *testing.T) {
	c, err := New(Options{Node: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CheckPosition("found:7"); err != nil {
		t.Errorf("a position of a log found behind http: %v", err)
	}
	for _, pos := range []string{"named:7", "nonsense"} {
		if err := c.CheckPosition(pos); err == nil {
			t.Errorf("%q taken as a position of the node's log", pos)
		}
	}
}
