package cometbft

import (
	"slices"
	"testing"

	"github.com/evtctl/evtctl/internal/cometbfttest"
	"github.com/evtctl/evtctl/pkg/client"
)

// TestLines runs the reader against real nodes of each CometBFT line, the lines side by
// side, each line's nodes shared by its subtests.
func TestLines(t *testing.T) {
	if testing.Short() {
		t.Skip("starts CometBFT nodes")
	}
	for _, line := range cometbfttest.Lines {
		t.Run(line, func(t *testing.T) {
			t.Parallel()
			n := startLine(t, line)
			t.Run("Detect", func(t *testing.T) { t.Parallel(); testDetect(t, n) })
			t.Run("Walk", func(t *testing.T) { t.Parallel(); testWalk(t, n.val, 12) })
			t.Run("WalkBlockEvents", func(t *testing.T) { t.Parallel(); testWalk(t, n.kv, 6) })
		})
	}
}

func testDetect(t *testing.T, n *lineNodes) {
	ctx := testCtx(t)
	st, err := Detect(ctx, Options{Options: client.Options{Node: n.val.URL}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Line{"0.37": Line037, "0.38": Line038, "1.0": Line1}[n.line]
	if st.Line != want || st.ChainID == "" || st.Latest < 1 {
		t.Fatalf("Detect = %+v, want line %s", st, want)
	}
}

// testWalk sends transactions, then walks the node forward in small pages and back, and
// compares both walks with what the checker reads, item for item.
func testWalk(t *testing.T, node *cometbfttest.Node, txs int) {
	ctx := testCtx(t)
	to := sendTxs(t, ctx, node, "walk", txs)
	r := newReader(t, node, Options{Concurrency: 3})
	oldest, err := r.Oldest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	items := walkForward(t, ctx, r, Position{}, to, 7)
	checkItems(t, ctx, node, items, oldest.Height, to)

	// Back from the end of height to, in pages of 5, newest first.
	var back []client.Item
	before := Position{Height: to + 1}
	for {
		p, err := r.Backward(ctx, PageRequest{Before: before, Max: 5})
		if err != nil {
			t.Fatal(err)
		}
		back = append(back, p.Items...)
		if !p.More {
			break
		}
		before = p.Next
	}
	slices.Reverse(back)
	if len(back) != len(items) {
		t.Fatalf("back: %d items, forward: %d", len(back), len(items))
	}
	for i := range back {
		if string(back[i].Raw) != string(items[i].Raw) {
			t.Fatalf("item %d back %s, forward %s", i, back[i].Raw, items[i].Raw)
		}
	}
	t.Logf("%d items of heights %d to %d", len(items), oldest.Height, to)
}
