package client

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/evtctl/evtctl/internal/testwait"
	"github.com/evtctl/evtctl/pkg/wire"
)

// deepCopy keeps an item beyond the callback, as a caller of ReuseMemory must.
func deepCopy(it Item) Item {
	return Item{Item: wire.Item{Cursor: string([]byte(it.Cursor)), Event: string([]byte(it.Event)), Data: bytes.Clone(it.Data)}, Raw: bytes.Clone(it.Raw)}
}

// With ReuseMemory, every item seen inside the callback is what the node sent, although
// reply buffers are recycled from page to page, in both kinds of range and in a stream. With
// the race detector (as CI runs), a released buffer is wiped, so a use after release shows.
func TestReuseMemoryDeliversIntactItems(t *testing.T) {
	forEachNode(t, func(t *testing.T, k nodeKind) {
		n := k.new(t, nodeOpts{})
		want := n.Append(t, events(2500, "Tx")...)
		c := newTestClient(t, n.URL())
		ctx := context.Background()

		var plain []Item
		if err := c.Range(ctx, RangeOptions{PageSize: 100}, func(items []Item) error {
			plain = append(plain, items...)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		for _, reverse := range []bool{false, true} {
			var got []Item
			err := c.Range(ctx, RangeOptions{PageSize: 100, Reverse: reverse, ReuseMemory: true}, func(items []Item) error {
				for _, it := range items {
					got = append(got, deepCopy(it))
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(plain) || len(got) != len(want) {
				t.Fatalf("reverse=%v: %d items, want %d", reverse, len(got), len(want))
			}
			for i := range got {
				p := plain[i]
				if reverse {
					p = plain[len(plain)-1-i]
				}
				if got[i].Cursor != p.Cursor || !bytes.Equal(got[i].Raw, p.Raw) || !bytes.Equal(got[i].Data, p.Data) {
					t.Fatalf("reverse=%v: item %d differs with reuse:\n%s\n%s", reverse, i, got[i].Raw, p.Raw)
				}
			}
		}

		var streamed []Item
		stop := errors.New("stop")
		ctx2, cancel := testwait.Context(t, ctx)
		defer cancel()
		err := c.Stream(ctx2, StreamOptions{FromStart: true, PageSize: 100, Wait: 50 * time.Millisecond, ReuseMemory: true}, func(b Batch) error {
			for _, it := range b.Items {
				streamed = append(streamed, deepCopy(it))
			}
			if len(streamed) >= len(want) {
				return stop
			}
			return nil
		})
		if !errors.Is(err, stop) {
			t.Fatalf("stream ended with %v after %d items", err, len(streamed))
		}
		for i := range want {
			if streamed[i].Cursor != plain[i].Cursor || !bytes.Equal(streamed[i].Raw, plain[i].Raw) {
				t.Fatalf("streamed item %d differs with reuse", i)
			}
		}
	})
}
