package cometbft

import (
	"context"
	"testing"

	"github.com/evtctl/evtctl/internal/cometbfttest"
)

// subscribe subscribes to query on node's websocket as a client of the node does (see
// cometbfttest.Subscribe).
func subscribe(t testing.TB, ctx context.Context, node *cometbfttest.Node, query string) <-chan cometbfttest.WSEvent {
	t.Helper()
	ch, err := cometbfttest.Subscribe(ctx, node, query)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}
