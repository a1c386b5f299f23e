package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/evtctl/evtctl/internal/server"
)

// A notification (a call without an id, or with a null one, as a Tendermint node counts it)
// gets no reply: HTTP 200 with an empty body, whatever its method and params. In a batch it is
// left out of the replies, and a batch of notifications alone gets an empty body too.
func TestNotificationsGetNoReply(t *testing.T) {
	n, rc := newCountingNode(t, server.Config{MaxWait: time.Hour})
	head := n.ingest(ceJSON("/nt", "1", "nt.a", 1)).Cursor
	waits := `"after":"` + head + `","waitTime":"1h"` // run, it would wait an hour for a new item
	for _, body := range []string{
		`{"jsonrpc":"2.0","method":"events","params":{"maxItems":1}}`,
		`{"jsonrpc":"2.0","id":null,"method":"events","params":{"maxItems":1}}`,
		`{"jsonrpc":"2.0","method":"events","params":{` + waits + `}}`,
		`{"jsonrpc":"2.0","id":null,"method":"events","params":{` + waits + `}}`,
		`{"jsonrpc":"2.0","method":"status"}`,
		`{"jsonrpc":"2.0","method":"events","params":{"after":"zzz"}}`,
		`{"method":"events","params":{"maxItems":"abc"}}`,
		`[{"jsonrpc":"2.0","method":"events"},{"jsonrpc":"2.0","id":null,"method":"events","params":{` + waits + `}}]`,
	} {
		reads := rc.reads.Load()
		resp, b := n.post("/", "application/json", body)
		if resp.StatusCode != http.StatusOK || len(b) != 0 {
			t.Errorf("%s: HTTP %d %q, want 200 and no body", body, resp.StatusCode, b)
		}
		// An events notification is not run: it reads nothing, and one that would wait is
		// answered all the same.
		if r := rc.reads.Load(); r != reads {
			t.Errorf("%s: %d reads of the log, want none", body, r-reads)
		}
	}

	resp, b := n.post("/", "application/json", `[
		{"jsonrpc":"2.0","id":1,"method":"events","params":{"maxItems":1}},
		{"jsonrpc":"2.0","method":"events","params":{"maxItems":1}},
		{"jsonrpc":"2.0","id":"b","method":"events","params":{"after":"zzz"}}]`)
	var rs []rpcReply
	mustUnmarshal(t, b, &rs)
	if resp.StatusCode != http.StatusOK || len(rs) != 2 || string(rs[0].ID) != "1" || rs[0].Result == nil ||
		string(rs[1].ID) != `"b"` || rs[1].Error == nil || rs[1].Error.Code != -32603 {
		t.Fatalf("a batch with a notification: HTTP %d %s", resp.StatusCode, b)
	}
}

// Parameter names are matched as a Tendermint node matches them (Go's encoding/json): exactly,
// or else without regard to case; of several that match, the last wins.
func TestParamNamesIgnoreCase(t *testing.T) {
	n := newMemNode(t)
	cs := n.ingestBatch([]string{ceJSON("/pc", "1", "pc.a", 1), ceJSON("/pc", "2", "pc.b", 2), ceJSON("/pc", "3", "pc.a", 3)})
	for _, tc := range []struct {
		params string
		want   []string
	}{
		{`{"maxitems":1}`, cs[2:]},
		{`{"MAXITEMS":1}`, cs[2:]},
		{`{"MaxItems":2}`, []string{cs[2], cs[1]}},
		{`{"maxItems":1,"maxitems":2}`, []string{cs[2], cs[1]}},
		{`{"maxitems":2,"maxItems":1}`, cs[2:]},
		{`{"maxItems":1,"maxItems":2}`, []string{cs[2], cs[1]}},
		{`{"BEFORE":"` + cs[2] + `","MAXITEMS":1}`, cs[1:2]},
		{`{"After":"` + cs[0] + `","waittime":1,"maxItems":1}`, cs[2:]},
		{`{"FILTER":{"QUERY":"tm.event = 'pc.a'"},"maxItems":5}`, []string{cs[2], cs[0]}},
		{`{"filter":{"query":"tm.event = 'pc.a'"},"Filter":{"Query":"tm.event = 'pc.b'"}}`, cs[1:2]},
		// A second filter object adds to the first, as decoding into the same struct does;
		// null takes the filter away.
		{`{"filter":{"query":"tm.event = 'pc.b'"},"filter":{}}`, cs[1:2]},
		{`{"filter":{"query":"tm.event = 'pc.b'","query":null}}`, cs[1:2]},
		{`{"filter":{"query":"tm.event = 'pc.b'"},"filter":null,"maxItems":1}`, cs[2:]},
		// A null value leaves what an earlier one set.
		{`{"maxItems":1,"MAXITEMS":null}`, cs[2:]},
	} {
		r := n.events(tc.params)
		var got []string
		for _, it := range r.Items {
			got = append(got, it.Cursor)
		}
		if strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("params %s: items %v, want %v", tc.params, got, tc.want)
		}
	}
}

// A negative waitTime is no error: a Tendermint node raises it to its shortest wait, and an
// evtctl node takes the default wait, which is the same one second unless configured. On a
// fake clock, the wait is seen to be exactly that.
func TestNegativeWaitTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, _ := newFakeClockNode(t, server.Config{})
		c := n.ingest(ceJSON("/nw", "1", "nw.a", 1)).Cursor
		for _, params := range []string{`{"waitTime":-1}`, `{"waitTime":-99999999999}`, `{"wait_time":"-5s"}`, `["",0,"","",-1]`} {
			if r := n.events(params); len(r.Items) != 1 {
				t.Errorf("params %s: %d items, want 1", params, len(r.Items))
			}
		}
		if r := n.getEvents("waitTime=-5"); len(r.Items) != 1 {
			t.Errorf("GET waitTime=-5: %d items, want 1", len(r.Items))
		}
		// With nothing to return, the call waits the default second, not less and not more.
		for _, params := range []string{
			fmt.Sprintf(`{"after":%q,"waitTime":-1}`, c),
			fmt.Sprintf(`{"after":%q,"waitTime":-99999999999}`, c),
			fmt.Sprintf(`{"after":%q,"wait_time":"-5s"}`, c),
			fmt.Sprintf(`["",0,%q,"",-1]`, c),
		} {
			start := time.Now()
			r := n.events(params)
			if d := time.Since(start); len(r.Items) != 0 || d != time.Second {
				t.Errorf("params %s with nothing new: %d items after %v, want none after 1s", params, len(r.Items), d)
			}
		}
		start := time.Now()
		r := n.getEvents("waitTime=-5&after=" + c)
		if d := time.Since(start); len(r.Items) != 0 || d != time.Second {
			t.Errorf("GET waitTime=-5 with nothing new: %d items after %v, want none after 1s", len(r.Items), d)
		}
	})
}

// The envelope as a Tendermint node reads it: "jsonrpc" may be left out, member names match
// without regard to case, and an id is a string or a whole number.
func TestEnvelope(t *testing.T) {
	n := newMemNode(t)
	n.ingest(ceJSON("/ev", "1", "ev.a", 1))
	for _, tc := range []struct{ body, id string }{
		{`{"id":1,"method":"events","params":{}}`, `1`},
		{`{"jsonrpc":"","id":2,"method":"events"}`, `2`},
		{`{"jsonrpc":null,"id":3,"method":"events"}`, `3`},
		{`{"JSONRPC":"2.0","ID":"four","METHOD":"events","PARAMS":{"MAXITEMS":1}}`, `"four"`},
		{`{"jsonrpc":"2.0","id":-5,"method":"events"}`, `-5`},
		{`{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"events"}`, `123456789012345678901234567890`},
		{`{"jsonrpc":"2.0","id":"a\"b\u00e9","method":"events"}`, `"a\"b\u00e9"`},
	} {
		r, b := n.rpcRaw(tc.body)
		if r.Result == nil || string(r.ID) != tc.id {
			t.Errorf("%s: %s, want a result with id %s", tc.body, b, tc.id)
		}
	}
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1.5,"method":"events"}`,
		`{"jsonrpc":"2.0","id":1e3,"method":"events"}`,
		`{"jsonrpc":"2.0","id":true,"method":"events"}`,
		`{"jsonrpc":"2.0","id":{"a":1},"method":"events"}`,
		`{"jsonrpc":"2.0","id":[1],"method":"events"}`,
	} {
		r, b := n.rpcRaw(body)
		if r.Error == nil || r.Error.Code != -32600 || string(r.ID) != "null" || !strings.Contains(r.Error.Data, "id") {
			t.Errorf("%s: %s, want -32600 with a null id", body, b)
		}
	}
}
