package cometbfttest

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
)

// The checker reads a node's heights itself, by GET and encoding/json, and says what items
// each must give: the reference a reader of the chain (and evtctl's output) is compared
// with, item for item. It shares no code with the reader.

// Expect returns the items height h of node must give, each decoded from JSON (numbers as
// json.Number): the block's events, then each transaction with its hash and result.
func Expect(ctx context.Context, node *Node, h int64) ([]any, error) {
	var res struct {
		Result map[string]json.RawMessage `json:"result"`
	}
	arg := url.Values{"height": {strconv.FormatInt(h, 10)}}
	if err := node.Get(ctx, "block_results", arg, &res); err != nil {
		return nil, fmt.Errorf("checker: %w", err)
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
		return nil, fmt.Errorf("checker: %w", err)
	}
	var events []json.RawMessage
	for _, name := range []string{"finalize_block_events", "begin_block_events", "end_block_events"} {
		var evs []json.RawMessage
		if raw, ok := res.Result[name]; ok {
			if err := json.Unmarshal(raw, &evs); err != nil {
				return nil, fmt.Errorf("checker: %s: %w", name, err)
			}
		}
		events = append(events, evs...)
	}
	if events == nil {
		events = []json.RawMessage{}
	}
	var txResults []json.RawMessage
	if err := json.Unmarshal(res.Result["txs_results"], &txResults); err != nil {
		return nil, fmt.Errorf("checker: txs_results: %w", err)
	}
	txs := blk.Result.Block.Data.Txs
	if len(txs) != len(txResults) {
		return nil, fmt.Errorf("checker: height %d: %d txs, %d results", h, len(txs), len(txResults))
	}
	cursor := func(i int) string { return fmt.Sprintf("h%012d.%08d", h, i) }
	items := []any{map[string]any{
		"cursor": cursor(0),
		"event":  "NewBlockEvents",
		"data": map[string]any{"type": "tendermint/event/NewBlockEvents", "value": map[string]any{
			"height": strconv.FormatInt(h, 10), "events": events, "num_txs": strconv.Itoa(len(txs)),
		}},
	}}
	for i, tx := range txs {
		b, err := base64.StdEncoding.DecodeString(tx)
		if err != nil {
			return nil, fmt.Errorf("checker: height %d: transaction %d: %w", h, i, err)
		}
		sum := sha256.Sum256(b)
		items = append(items, map[string]any{
			"cursor": cursor(i + 1),
			"event":  "Tx",
			"data": map[string]any{"type": "tendermint/event/Tx", "value": map[string]any{
				"height": h, "index": i, "hash": strings.ToUpper(fmt.Sprintf("%x", sum)), "tx": tx, "result": txResults[i],
			}},
		})
	}
	for i, it := range items {
		b, err := json.Marshal(it)
		if err != nil {
			return nil, err
		}
		if items[i], err = DecodeJSON(b); err != nil {
			return nil, err
		}
	}
	return items, nil
}

// DecodeJSON decodes one JSON value, numbers as json.Number, as Expect's items are.
func DecodeJSON(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var out any
	if err := d.Decode(&out); err != nil {
		return nil, fmt.Errorf("%w: %.200s", err, b)
	}
	return out, nil
}

// CheckItems compares items (each an item's JSON, as evtctl writes it with -o jsonl) with
// what the checker reads of heights from to to, inclusive: the same items, in order, none
// missing or repeated.
func CheckItems(ctx context.Context, node *Node, items [][]byte, from, to int64) error {
	var want []any
	for h := from; h <= to; h++ {
		w, err := Expect(ctx, node, h)
		if err != nil {
			return err
		}
		want = append(want, w...)
	}
	for i, raw := range items {
		if i >= len(want) {
			break
		}
		got, err := DecodeJSON(raw)
		if err != nil {
			return fmt.Errorf("item %d: %w", i, err)
		}
		if !reflect.DeepEqual(got, want[i]) {
			w, _ := json.Marshal(want[i])
			return fmt.Errorf("item %d of heights %d to %d:\n got %s\nwant %s", i, from, to, bytes.TrimSpace(raw), w)
		}
	}
	if len(items) != len(want) {
		return fmt.Errorf("%d items for heights %d to %d; the checker finds %d", len(items), from, to, len(want))
	}
	return nil
}

// HeightOf is the height a cursor of a chain's item names.
func HeightOf(cursor string) (int64, error) {
	h, _, ok := strings.Cut(strings.TrimPrefix(cursor, "h"), ".")
	n, err := strconv.ParseInt(h, 10, 64)
	if !ok || err != nil || !strings.HasPrefix(cursor, "h") {
		return 0, fmt.Errorf("%q is not a cursor of a chain's item", cursor)
	}
	return n, nil
}
