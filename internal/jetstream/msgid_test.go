package jetstream

import (
	"fmt"
	"strings"
	"testing"
)

// Different (source, id) pairs never share a message id, however they are spelled, and
// every id is a short, clean header value.
func TestMsgIDDistinguishesPairs(t *testing.T) {
	pairs := [][2]string{
		{"/a", "b"}, {"/a b", "c"}, {"/a", "b c"}, {"/a b c", ""}, {"", "/a b c"},
		{"/ab", ""}, {"/a", "b\n"}, {"/a\n", "b"}, {"/é", "ü"}, {"/e", "u"},
		{"k:/a", "b"}, {"h:x", "y"}, {"/x", "h:y"}, {strings.Repeat("s", 150), strings.Repeat("i", 50)},
		{strings.Repeat("s", 150), strings.Repeat("i", 51)}, {strings.Repeat("s", 151), strings.Repeat("i", 50)},
	}
	for i := range 200 {
		pairs = append(pairs, [2]string{fmt.Sprintf("/src/%d", i%7), fmt.Sprintf("id-%d", i)})
	}
	seen := map[string][2]string{}
	for _, p := range pairs {
		id := msgID(p[0], p[1])
		if q, dup := seen[id]; dup && q != p {
			t.Fatalf("%q and %q share the message id %q", q, p, id)
		}
		seen[id] = p
		if len(id) > 210 || strings.ContainsAny(id, "\r\n\t") || !strings.HasPrefix(id, "k:") && !strings.HasPrefix(id, "h:") {
			t.Fatalf("message id %q of %q is not a clean header value", id, p)
		}
		if id != msgID(p[0], p[1]) {
			t.Fatalf("message id of %q is not stable", p)
		}
	}
	if got := msgID("/shop", "order-42"); got != "k:/shop order-42" {
		t.Fatalf("a plain pair is spelled %q", got)
	}
}

func TestSubjectMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, subject string
		want             bool
	}{
		{"evtctl.x", "evtctl.x", true}, {"evtctl.*", "evtctl.x", true}, {"evtctl.>", "evtctl.x.y", true},
		{">", "evtctl", true}, {"evtctl.*", "evtctl.x.y", false}, {"evtctl.y", "evtctl.x", false},
		{"evtctl.x.y", "evtctl.x", false}, {"evtctl.>", "evtctl", false},
	} {
		if got := subjectMatch(tc.pattern, tc.subject); got != tc.want {
			t.Errorf("subjectMatch(%q, %q) = %v", tc.pattern, tc.subject, got)
		}
	}
}
