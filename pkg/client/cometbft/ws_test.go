package cometbft

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"github.com/tidwall/gjson"

	"github.com/evtctl/evtctl/internal/cometbfttest"
)

// wsEvent is what a websocket subscriber gets: an event's data, or the end of the
// subscription (Err: the node's error, or the connection's).
type wsEvent struct {
	Data gjson.Result
	Err  string
}

// subscribe subscribes to query on node's websocket, as a client of the node does, and
// sends what comes on the channel, reading as fast as it can, until the subscription ends
// or ctx does. It returns once the node has confirmed the subscription.
func subscribe(t testing.TB, ctx context.Context, node *cometbfttest.Node, query string) <-chan wsEvent {
	t.Helper()
	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(node.URL, "http")+"/websocket", nil)
	if err != nil {
		t.Fatal(err)
	}
	conn.SetReadLimit(64 << 20)
	req, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "subscribe", "params": map[string]string{"query": query}})
	if err := conn.Write(ctx, websocket.MessageText, req); err != nil {
		t.Fatal(err)
	}
	if _, b, err := conn.Read(ctx); err != nil || gjson.GetBytes(b, "error").Exists() {
		t.Fatalf("subscribe %q: %v %s", query, err, b)
	}
	out := make(chan wsEvent, 1<<16)
	go func() {
		defer close(out)
		defer conn.CloseNow()
		for {
			_, b, err := conn.Read(ctx)
			if err != nil {
				out <- wsEvent{Err: err.Error()}
				return
			}
			doc := gjson.ParseBytes(b)
			if e := doc.Get("error"); e.Exists() {
				out <- wsEvent{Err: e.Get("data").String()}
				return
			}
			out <- wsEvent{Data: doc.Get("result.data")}
		}
	}()
	return out
}
