package cometbft

import (
	"context"
	"reflect"
	"testing"

	"github.com/evtctl/evtctl/internal/cometbfttest"
	"github.com/evtctl/evtctl/pkg/client"
)

func decodeJSON(t testing.TB, b []byte) any {
	t.Helper()
	out, err := cometbfttest.DecodeJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkItems compares items, the reader's for heights from to to, with what the checker
// (cometbfttest.CheckItems) reads of those heights; and checks that each item's fields are
// its raw JSON's.
func checkItems(t testing.TB, ctx context.Context, node *cometbfttest.Node, items []client.Item, from, to int64) {
	t.Helper()
	raws := make([][]byte, len(items))
	for i, it := range items {
		raws[i] = it.Raw
	}
	if err := cometbfttest.CheckItems(ctx, node, raws, from, to); err != nil {
		t.Fatalf("the reader's items: %v", err)
	}
	for i, it := range items {
		fields := decodeJSON(t, it.Raw).(map[string]any)
		if fields["cursor"] != it.Cursor || fields["event"] != it.Event || !reflect.DeepEqual(decodeJSON(t, it.Data), fields["data"]) {
			t.Fatalf("item %d: Cursor %q, Event %q and Data are not those of its JSON %s", i, it.Cursor, it.Event, it.Raw)
		}
	}
}
