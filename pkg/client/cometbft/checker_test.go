package cometbft

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/evtctl/evtctl/internal/cometbfttest"
	"github.com/evtctl/evtctl/pkg/client"
)

// The checker reads a node's heights itself, by GET and encoding/json, and says what items
// each must give: the reference the reader is compared with, item for item.

// expectHeight returns the items height h must give, decoded.
func expectHeight(t testing.TB, ctx context.Context, node *cometbfttest.Node, h int64) []any {
	t.Helper()
	var res struct {
		Result map[string]json.RawMessage `json:"result"`
	}
	arg := url.Values{"height": {strconv.FormatInt(h, 10)}}
	if err := node.Get(ctx, "block_results", arg, &res); err != nil {
		t.Fatalf("checker: %v", err)
	}
	var blk struct {
		Result struct {
			Block struct {
				Data struct {
					Txs []string `json:"txs"`
				} `json:"data"`
			} `json:"block"`
		} `json:"result"`
	}
	if err := node.Get(ctx, "block", arg, &blk); err != nil {
		t.Fatalf("checker: %v", err)
	}
	var events []json.RawMessage
	for _, name := range []string{"finalize_block_events", "begin_block_events", "end_block_events"} {
		var evs []json.RawMessage
		if raw, ok := res.Result[name]; ok {
			if err := json.Unmarshal(raw, &evs); err != nil {
				t.Fatalf("checker: %s: %v", name, err)
			}
		}
		events = append(events, evs...)
	}
	if events == nil {
		events = []json.RawMessage{}
	}
	var txResults []json.RawMessage
	if err := json.Unmarshal(res.Result["txs_results"], &txResults); err != nil {
		t.Fatalf("checker: txs_results: %v", err)
	}
	txs := blk.Result.Block.Data.Txs
	if len(txs) != len(txResults) {
		t.Fatalf("checker: height %d: %d txs, %d results", h, len(txs), len(txResults))
	}
	cursor := func(i int) string { return fmt.Sprintf("h%012d.%08d", h, i) }
	out := []any{decode(t, map[string]any{
		"cursor": cursor(0),
		"event":  "NewBlockEvents",
		"data": map[string]any{"type": "tendermint/event/NewBlockEvents", "value": map[string]any{
			"height": strconv.FormatInt(h, 10), "events": events, "num_txs": strconv.Itoa(len(txs)),
		}},
	})}
	for i, tx := range txs {
		b, err := base64.StdEncoding.DecodeString(tx)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		out = append(out, decode(t, map[string]any{
			"cursor": cursor(i + 1),
			"event":  "Tx",
			"data": map[string]any{"type": "tendermint/event/Tx", "value": map[string]any{
				"height": h, "index": i, "hash": strings.ToUpper(fmt.Sprintf("%x", sum)), "tx": tx, "result": txResults[i],
			}},
		}))
	}
	return out
}

// decode turns a value into what decoding its JSON gives, numbers as json.Number.
func decode(t testing.TB, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return decodeJSON(t, b)
}

func decodeJSON(t testing.TB, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var out any
	if err := d.Decode(&out); err != nil {
		t.Fatalf("%v: %.200s", err, b)
	}
	return out
}

// checkItems compares items, the reader's for heights from to to, with what the checker
// reads of those heights; and checks that each item's fields are its raw JSON's.
func checkItems(t testing.TB, ctx context.Context, node *cometbfttest.Node, items []client.Item, from, to int64) {
	t.Helper()
	var want []any
	for h := from; h <= to; h++ {
		want = append(want, expectHeight(t, ctx, node, h)...)
	}
	if len(items) != len(want) {
		t.Fatalf("the reader gave %d items for heights %d to %d; the checker finds %d", len(items), from, to, len(want))
	}
	for i, it := range items {
		got := decodeJSON(t, it.Raw)
		if !reflect.DeepEqual(got, want[i]) {
			g, _ := json.Marshal(got)
			w, _ := json.Marshal(want[i])
			t.Fatalf("item %d (%s):\n got %s\nwant %s", i, it.Cursor, g, w)
		}
		fields := decodeJSON(t, it.Raw).(map[string]any)
		if fields["cursor"] != it.Cursor || fields["event"] != it.Event || !reflect.DeepEqual(decodeJSON(t, it.Data), fields["data"]) {
			t.Fatalf("item %d: Cursor %q, Event %q and Data are not those of its JSON %s", i, it.Cursor, it.Event, it.Raw)
		}
	}
}
