package filter

import (
	"strings"
	"testing"
)

// crossEventTx is the Tx of the recorded cross-event subscription (tx "color2=blue2" on a
// kvstore node), flattened as a node's event bus flattens it: its first ABCI event has the
// creator "Cosmoshi Netowoko" and the key "color2", its second the creator "Cosmoshi" and
// the key "blue2".
var crossEventTx = map[string][]string{
	"app.creator":     {"Cosmoshi Netowoko", "Cosmoshi"},
	"app.key":         {"color2", "blue2"},
	"app.index_key":   {"index is working", "index is working"},
	"app.noindex_key": {"index is working", "index is working"},
	"tm.event":        {"Tx"},
	"tx.hash":         {"5BC1B1B0E4E0B3E57E7B0C1B8BA4C2C2F7F14F3D8F8D1E1F4C5B2A1E0D9C8B7A"},
	"tx.height":       {"550"},
}

var blockAttrs = map[string][]string{
	"tm.event":         {"NewBlockEvents"},
	"block.height":     {"41"},
	"begin_event.foo":  {"100", "200"},
	"begin_event.bar":  {"200", "300"},
	"coin.amount":      {"8.5stake", "-3", "99999999999999999999"},
	"x.y.z":            {"deep"},
	"when.at":          {"2026-11-22T10:00:00Z", "not a time"},
	"when.day":         {"2026-11-22"},
	"empty.value":      {""},
	"dotted.type.name": {"v"},
}

var attrCases = []struct {
	query string
	attrs map[string][]string
	want  bool
}{
	// Conditions joined by AND hold across the ABCI events of one transaction, as a
	// subscription matches (the recorded ws_crossevent case); tx_search would not match.
	{`tm.event='Tx' AND app.key='blue2' AND app.creator='Cosmoshi Netowoko'`, crossEventTx, true},
	{`tm.event = 'Tx' AND app.key = 'color2'`, crossEventTx, true},
	{`tm.event = 'Tx' AND app.key = 'red'`, crossEventTx, false},
	{`tm.event = 'NewBlockEvents'`, crossEventTx, false},
	{`tx.height = 550`, crossEventTx, true},
	{`tx.height > 549 AND tx.height <= 550`, crossEventTx, true},
	{`tx.height < 550`, crossEventTx, false},
	{`tx.hash = '5BC1B1B0E4E0B3E57E7B0C1B8BA4C2C2F7F14F3D8F8D1E1F4C5B2A1E0D9C8B7A'`, crossEventTx, true},
	{`app.creator CONTAINS 'Netowoko'`, crossEventTx, true},
	{`app.creator CONTAINS 'nobody'`, crossEventTx, false},
	{`app.key EXISTS`, crossEventTx, true},
	{`app.missing EXISTS`, crossEventTx, false},
	{`block.height EXISTS`, crossEventTx, false},

	// A tag that is an event type by itself has the value "": EXISTS holds, = '' holds.
	{`app EXISTS`, crossEventTx, true},
	{`tm EXISTS`, crossEventTx, true},
	{`app = ''`, crossEventTx, true},
	{`app CONTAINS ''`, crossEventTx, true},
	{`app = 'x'`, crossEventTx, false},
	{`ap EXISTS`, crossEventTx, false},
	{`tm.ev EXISTS`, crossEventTx, false},
	{`x.y EXISTS`, blockAttrs, true}, // the type of x.y.z
	{`x EXISTS`, blockAttrs, false},
	{`dotted.type EXISTS`, blockAttrs, true},
	{`dotted EXISTS`, blockAttrs, false},

	// Numbers compare by value; a value is read as its leading number, as a node reads it.
	{`block.height = 41`, blockAttrs, true},
	{`block.height = 41.0`, blockAttrs, true},
	{`block.height >= 42`, blockAttrs, false},
	{`begin_event.foo > 150`, blockAttrs, true},
	{`begin_event.foo > 200`, blockAttrs, false},
	{`begin_event.foo = 100 AND begin_event.bar = 300`, blockAttrs, true},
	{`coin.amount = 8.5`, blockAttrs, true},
	{`coin.amount < 0`, blockAttrs, false}, // "-3" is no number
	{`coin.amount > 99999999999999999`, blockAttrs, true},
	{`begin_event.foo = '100'`, blockAttrs, true},
	{`begin_event.foo = '1'`, blockAttrs, false},
	{`x.y.z = 'deep'`, blockAttrs, true},
	{`empty.value = ''`, blockAttrs, true},
	{`empty.value EXISTS`, blockAttrs, true},

	// Times and dates.
	{`when.at = TIME 2026-11-22T10:00:00Z`, blockAttrs, true},
	{`when.at > TIME 2026-11-22T09:00:00Z`, blockAttrs, true},
	{`when.at < TIME 2026-11-22T09:00:00Z`, blockAttrs, false},
	{`when.day = DATE 2026-11-22`, blockAttrs, true},
	{`when.day > DATE 2026-11-22`, blockAttrs, false},

	// evtctl's additions evaluate too.
	{`tm.event = 'Tx' OR tm.event = 'NewBlockEvents'`, blockAttrs, true},
	{`NOT tm.event = 'Tx'`, blockAttrs, true},
	{`NOT app EXISTS`, crossEventTx, false},
	{`(app.key = 'red' OR app.key = 'blue2') AND tx.height = 550`, crossEventTx, true},
	{`tm.event MATCHES '*'`, blockAttrs, true},
	{`app.key MATCHES 'blue2.#'`, crossEventTx, true},

	// No attributes at all: nothing matches, as on a node.
	{`tm.event EXISTS`, map[string][]string{}, false},
	{`NOT tm.event EXISTS`, nil, false},
}

func TestMatchAttributes(t *testing.T) {
	for _, tc := range attrCases {
		q, err := Compile(tc.query)
		if err != nil {
			t.Fatalf("Compile(%q): %v", tc.query, err)
		}
		if got := q.MatchAttributes(tc.attrs); got != tc.want {
			t.Errorf("%q: MatchAttributes = %v, want %v", tc.query, got, tc.want)
		}
	}
}

func TestMatchAttributesAll(t *testing.T) {
	var nilQuery *Query
	empty, err := Compile("")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []*Query{nilQuery, empty} {
		if !q.MatchAttributes(nil) || !q.MatchAttributes(crossEventTx) {
			t.Errorf("the empty query does not match everything")
		}
	}
}

// FuzzMatchAttributes checks MatchAttributes against the definition of a subscription's
// match: a query holds when it holds, condition by condition, over the values of each tag,
// and NOT inverts it.
func FuzzMatchAttributes(f *testing.F) {
	for _, tc := range attrCases {
		var flat []string
		for k, vs := range tc.attrs {
			for _, v := range vs {
				flat = append(flat, k+"="+v)
			}
		}
		f.Add(tc.query, strings.Join(flat, "\n"))
	}
	f.Fuzz(func(t *testing.T, src, pairs string) {
		q, err := Compile(src)
		if err != nil || q.MatchesAll() {
			return
		}
		attrs := map[string][]string{}
		for _, line := range strings.Split(pairs, "\n") {
			k, v, ok := strings.Cut(line, "=")
			if ok {
				attrs[k] = append(attrs[k], v)
			}
		}
		got := q.MatchAttributes(attrs)
		if len(attrs) == 0 && got {
			t.Fatalf("%q matches no attributes", src)
		}
		if len(attrs) == 0 {
			return
		}
		if not, err := Compile("NOT (" + src + ")"); err == nil && not.MatchAttributes(attrs) == got {
			t.Fatalf("%q and its negation agree (%v) on %q", src, got, pairs)
		}
	})
}
