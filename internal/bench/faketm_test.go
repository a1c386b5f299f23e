package bench

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/evtctl/evtctl/internal/tmfake"
)

// fakeTM is the shared fake Tendermint node with Tx events of a chain's shape.
type fakeTM struct{ *tmfake.Node }

func newFakeTM(t *testing.T) fakeTM { return fakeTM{tmfake.Start(t, tmfake.Options{})} }

// add appends n Tx events, one block each.
func (f fakeTM) add(n int) {
	for range n {
		h := f.Len() + 1
		data := fmt.Sprintf(`{"type":"tendermint/event/Tx","value":{"height":%d,"tx":"dXNlcj1hbGljZQ==","result":{}}}`, h)
		f.Append(tmfake.Event{Type: "Tx", Data: json.RawMessage(data)})
	}
}
