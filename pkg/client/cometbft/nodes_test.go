package cometbft

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/evtctl/evtctl/internal/cometbfttest"
	"github.com/evtctl/evtctl/internal/testwait"
	"github.com/evtctl/evtctl/pkg/client"
)

// lineNodes are the nodes of one CometBFT line that the tests share.
type lineNodes struct {
	line      string
	val       *cometbfttest.Node // a validator of the release's kvstore
	full      *cometbfttest.Node // a full node peered with val
	kv        *cometbfttest.Node // kvnode: block events
	prune     *cometbfttest.Node // kvnode: block events, keeps the last pruneKeep blocks
	discard   *cometbfttest.Node // keeps no block results
	companion *cometbfttest.Node // v1: for a data companion to prune results below companionRetain
}

const (
	pruneKeep       = 5
	companionRetain = 25
)

// startLine starts a line's nodes at once, for t and its subtests, skipping t when the line
// cannot be built.
func startLine(t *testing.T, line string) *lineNodes {
	t.Helper()
	start := time.Now()
	var cmt, kv cometbfttest.Binary
	var errC, errK error
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); cmt, errC = cometbfttest.Program(line, cometbfttest.KindCometBFT) }()
	go func() { defer wg.Done(); kv, errK = cometbfttest.Program(line, cometbfttest.KindKVNode) }()
	wg.Wait()
	if errC != nil {
		t.Skip(errC)
	}
	if errK != nil {
		t.Skip(errK)
	}
	n := &lineNodes{line: line}
	specs := []cometbfttest.Spec{
		{Bin: cmt, Config: cometbfttest.Config{TimeoutCommit: 500 * time.Millisecond}},
		{Bin: cmt, Config: cometbfttest.Config{Follow: cometbfttest.FollowSpec(0)}},
		{Bin: kv},
		{Bin: kv, Config: cometbfttest.Config{RetainBlocks: pruneKeep}},
		{Bin: cmt, Config: cometbfttest.Config{Discard: true}},
	}
	if line == "1.0" {
		specs = append(specs, cometbfttest.Spec{Bin: cmt})
	}
	nodes := cometbfttest.StartAll(t, specs...)
	n.val, n.full, n.kv, n.prune, n.discard = nodes[0], nodes[1], nodes[2], nodes[3], nodes[4]
	if line == "1.0" {
		n.companion = nodes[5]
	}
	t.Logf("CometBFT %s: %d nodes up in %v", line, len(specs), time.Since(start).Round(10*time.Millisecond))
	return n
}

// newReader returns a Reader of node, closed when t ends.
func newReader(t testing.TB, node *cometbfttest.Node, opts Options) *Reader {
	t.Helper()
	opts.Node = node.URL
	r, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// testCtx is a context that ends a little before t's deadline.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := testwait.Context(t, context.Background())
	t.Cleanup(cancel)
	return ctx
}

// sendTxs sends txs to node (see cometbfttest.Node.SendTxs): blocks of one and of many. It
// returns the height by which all are committed.
func sendTxs(t testing.TB, ctx context.Context, node *cometbfttest.Node, prefix string, n int) int64 {
	t.Helper()
	h, err := node.SendTxs(ctx, prefix, n)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// walkForward reads every item after from up to and including height to, in pages of max.
func walkForward(t testing.TB, ctx context.Context, r *Reader, from Position, to int64, max int) []client.Item {
	t.Helper()
	var items []client.Item
	after := from
	for {
		p, err := r.Forward(ctx, PageRequest{After: after, Max: max})
		if err != nil {
			t.Fatalf("Forward after %v: %v", after, err)
		}
		for _, it := range p.Items {
			pos, err := ParseCursor(it.Cursor)
			if err != nil {
				t.Fatal(err)
			}
			if pos.Height > to {
				return items
			}
			items = append(items, it)
		}
		if p.Next.Compare(after) <= 0 && len(p.Items) == 0 {
			t.Fatalf("Forward after %v made no progress (next %v)", after, p.Next)
		}
		after = p.Next
		if after.Height > to || after.Height == to && after.Index == EndIndex {
			return items
		}
	}
}
