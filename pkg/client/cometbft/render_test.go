package cometbft

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/evtctl/evtctl/pkg/render"
)

// The items go through evtctl's renderers as a Tendermint node's do: jsonl writes them as
// they are (consecutive items in one piece), fields and jq read their members, pretty
// shows the event name and the value.
func TestItemsRender(t *testing.T) {
	res := jsonOf(capture(t, "v0.37/block_results.json")).Get("result")
	at := time.Date(2026, 11, 22, 13, 39, 11, 957e6, time.UTC)
	d, err := buildHeight(blockMeta{height: 11, numTxs: 1, time: at}, res, []string{"Y2l0eT1vc2xv"})
	if err != nil {
		t.Fatal(err)
	}
	out := func(opts render.Options) string {
		var b bytes.Buffer
		r, err := render.New(&b, opts)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Items(d.items); err != nil {
			t.Fatal(err)
		}
		if err := r.Flush(); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	if got, want := out(render.Options{}), string(d.buf); got != want {
		t.Errorf("jsonl:\n got %s\nwant %s", got, want)
	}
	if got, want := out(render.Options{Fields: []string{"event", "data.value.hash"}}), `{"event":"NewBlockEvents","data.value.hash":null}`+"\n"+`{"event":"Tx","data.value.hash":"`+sha256Hex("city=oslo")+`"}`+"\n"; got != want {
		t.Errorf("fields:\n got %s\nwant %s", got, want)
	}
	jq, err := render.CompileJQ(context.Background(), `.data.value.result.events[]?.attributes[] | select(.key == "key") | .value`)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := out(render.Options{JQ: jq}), "city\noslo\n"; got != want {
		t.Errorf("jq: got %q, want %q", got, want)
	}
	pretty := out(render.Options{Format: "pretty"})
	if lines := strings.Split(strings.TrimSpace(pretty), "\n"); len(lines) != 2 || !strings.Contains(lines[0], "NewBlockEvents") || !strings.Contains(lines[1], `Tx  {"height":11,"index":0`) {
		t.Errorf("pretty:\n%s", pretty)
	}
	// Each item shows its block's time, which its cursor does not hold.
	for _, l := range strings.Split(strings.TrimSpace(pretty), "\n") {
		if !strings.HasPrefix(l, "2026-11-22T13:39:11.957Z  ") {
			t.Errorf("pretty: %q does not begin with the block's time", l)
		}
	}
}
