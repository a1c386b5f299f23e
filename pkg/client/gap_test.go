package client

import (
	"strings"
	"testing"
)

// TestGapSaysItsDetail: a source whose positions are not the events method's cursors (a
// Redis stream's entry ids) says what happened in Detail; the sentence evtctl prints must
// be its words, whatever the kind, not a reading of the cursors as the events method's.
func TestGapSaysItsDetail(t *testing.T) {
	for _, g := range []Gap{
		{Kind: GapPastNewest, After: "1795862243714-0", Newest: "1795862243000-0", Detail: "the newest id the stream ever gave is 1795862243000-0, before the cursor"},
		{Kind: GapOutOfOrder, After: "1795862243714-0", Newest: "1795862243000-0", Detail: "the stream's ids go back"},
		{Kind: GapRestarted, After: "1795862243714-0", Oldest: "5-0", Detail: "the stream was deleted and created again"},
		{Kind: GapLost, After: "1795862243714-0", Oldest: "1795862243999-0", Lost: 3, Detail: "the stream now starts at 1795862243999-0"},
	} {
		s := g.String()
		if !strings.Contains(s, g.Detail) || !strings.Contains(s, g.After) || strings.Contains(s, "holds no events") {
			t.Errorf("%v: said %q", g.Kind, s)
		}
	}
}
