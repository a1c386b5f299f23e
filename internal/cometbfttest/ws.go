package cometbfttest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/coder/websocket"
	"github.com/tidwall/gjson"
)

// WSEvent is what a websocket subscriber gets: an event's data, or the end of the
// subscription (Err: the node's error, or the connection's).
type WSEvent struct {
	Data gjson.Result
	Err  string
}

// Subscribe subscribes to query on node's websocket, as a client of the node does, and sends
// what comes on the channel, reading as fast as it can, until the subscription ends or ctx
// does; then it closes the channel. It returns once the node has confirmed the subscription.
func Subscribe(ctx context.Context, node *Node, query string) (<-chan WSEvent, error) {
	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(node.URL, "http")+"/websocket", nil)
	if err != nil {
		return nil, err
	}
	conn.SetReadLimit(64 << 20)
	req, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "subscribe", "params": map[string]string{"query": query}})
	if err := conn.Write(ctx, websocket.MessageText, req); err != nil {
		conn.CloseNow()
		return nil, err
	}
	if _, b, err := conn.Read(ctx); err != nil || gjson.GetBytes(b, "error").Exists() {
		conn.CloseNow()
		return nil, fmt.Errorf("subscribe %q: %v %s", query, err, b)
	}
	out := make(chan WSEvent, 1<<16)
	go func() {
		defer close(out)
		defer conn.CloseNow()
		for {
			_, b, err := conn.Read(ctx)
			if err != nil {
				out <- WSEvent{Err: err.Error()}
				return
			}
			doc := gjson.ParseBytes(b)
			if e := doc.Get("error"); e.Exists() {
				out <- WSEvent{Err: e.Get("data").String()}
				return
			}
			out <- WSEvent{Data: doc.Get("result.data")}
		}
	}()
	return out, nil
}

// CountTxs reads a subscription's events until it ends, or until none has come for quiet:
// how many were transactions, and how it ended ("closed", "quiet", or the node's error).
func CountTxs(ch <-chan WSEvent, quiet time.Duration) (txs int, ended string) {
	for ended == "" {
		select {
		case ev, ok := <-ch:
			switch {
			case !ok:
				ended = "closed"
			case ev.Err != "":
				ended = ev.Err
			case ev.Data.Get("value.TxResult").Exists():
				txs++
			}
		case <-time.After(quiet):
			ended = "quiet"
		}
	}
	return txs, ended
}
