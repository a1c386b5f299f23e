package wire_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/evtctl/evtctl/pkg/wire"
)

// tags lists the JSON names of t's fields, embedded structs' fields included.
func tags(t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && name == "" {
			out = append(out, tags(f.Type)...)
			continue
		}
		out = append(out, name)
	}
	return out
}

// TestTagsAreTheNames: the types' JSON names are the constants that the hand-written
// encoders and decoders use.
func TestTagsAreTheNames(t *testing.T) {
	for _, c := range []struct {
		v    any
		want []string
	}{
		{wire.Params{}, []string{wire.ParamFilter, wire.ParamMaxItems, wire.ParamAfter, wire.ParamBefore, wire.ParamWaitTime, wire.ParamOrder}},
		{wire.Filter{}, []string{wire.ParamQuery}},
		{wire.Request[*wire.Params]{}, []string{wire.KeyJSONRPC, wire.KeyID, wire.KeyMethod, wire.KeyParams}},
		{wire.Reply{}, []string{wire.KeyItems, wire.KeyMore, wire.KeyOldest, wire.KeyNewest, wire.KeyResume, wire.KeyOrder}},
		{wire.Item{}, []string{wire.KeyCursor, wire.KeyEvent, wire.KeyData}},
		{wire.Error{}, []string{wire.KeyCode, wire.KeyMessage, wire.KeyData}},
		{wire.StreamEnd{}, []string{wire.KeyEnd}},
		{wire.StreamTail{}, []string{wire.KeyMore, wire.KeyResume, wire.KeyNewest}},
		{wire.IngestReply{}, []string{wire.KeyCursor, wire.KeyDuplicate, wire.KeyID, "type"}},
		{wire.BatchReply{}, []string{wire.KeyCount, wire.KeyResults}},
	} {
		if got := tags(reflect.TypeOf(c.v)); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%T: JSON names %q, want %q", c.v, got, c.want)
		}
	}
	if got := wire.Positional; got != [5]string{"filter", "maxItems", "after", "before", "waitTime"} {
		t.Errorf("Positional = %q", got)
	}
}

// TestParamsAsTendermintTakesThem: a request marshals as the recorded requests to a
// Tendermint node were sent, waitTime a JSON number of nanoseconds.
func TestParamsAsTendermintTakesThem(t *testing.T) {
	req := wire.Request[*wire.Params]{JSONRPC: wire.Version, ID: json.RawMessage("3"), Method: wire.Method,
		Params: &wire.Params{Filter: &wire.Filter{Query: "tm.event = 'Tx'"}, MaxItems: 2, Before: "18ea61a240447c6e-00b7", WaitTime: time.Second}}
	got, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"jsonrpc":"2.0","id":3,"method":"events","params":{"filter":{"query":"tm.event = 'Tx'"},"maxItems":2,"before":"18ea61a240447c6e-00b7","waitTime":1000000000}}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// TestCapturesRoundTrip: the replies recorded from a real Tendermint node decode into the
// types and encode back to the same JSON.
func TestCapturesRoundTrip(t *testing.T) {
	files, err := filepath.Glob("../../testdata/tendermint-captures/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no captures: %v", err)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var env struct {
			Result *wire.Reply `json:"result"`
			Error  *wire.Error `json:"error"`
		}
		body := raw
		if strings.HasPrefix(filepath.Base(f), "get_") {
			body = []byte(`{"result":` + string(raw) + `}`) // the GET form: the bare result
		}
		if err := json.Unmarshal(body, &env); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		var got, want []byte
		var orig map[string]json.RawMessage
		if err := json.Unmarshal(body, &orig); err != nil {
			t.Fatal(err)
		}
		switch {
		case env.Error != nil:
			got, _ = json.Marshal(env.Error)
			want = orig[wire.KeyError]
			if env.Error.Error() == "" {
				t.Errorf("%s: an error without words", f)
			}
		case env.Result != nil:
			got, _ = json.Marshal(env.Result)
			want = orig[wire.KeyResult]
		default:
			t.Fatalf("%s: neither result nor error", f)
		}
		var wb bytes.Buffer
		if err := json.Compact(&wb, want); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, wb.Bytes()) {
			t.Errorf("%s: re-encoded\n%s\nwant\n%s", f, got, wb.Bytes())
		}
	}
}

func TestMessage(t *testing.T) {
	for code, want := range map[int]string{wire.CodeParseError: "Parse error", wire.CodeInternalError: "Internal error", wire.CodeBusy: "Server busy", 1: ""} {
		if got := wire.Message(code); got != want {
			t.Errorf("Message(%d) = %q, want %q", code, got, want)
		}
	}
}
