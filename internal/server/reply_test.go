package server

import (
	"encoding/json"
	"testing"

	"github.com/evtctl/evtctl/internal/eventlog"
	"github.com/evtctl/evtctl/pkg/cursor"
	"github.com/evtctl/evtctl/pkg/wire"
)

// The reply to a batch is what encoding/json makes of it, byte for byte.
func TestBatchReplyAsEncodingJSON(t *testing.T) {
	for _, n := range []int{0, 1, 3, 1000} {
		res := make([]eventlog.AppendResult, n)
		want := make([]wire.IngestReply, n)
		for i := range res {
			res[i] = eventlog.AppendResult{Cursor: cursor.New(1_700_000_000_000_000_000+int64(i)*997, uint64(i+1)<<(i%40), cursor.NodeWidth), Duplicate: i%3 == 1}
			want[i] = wire.IngestReply{Cursor: res[i].Cursor.String(), Duplicate: res[i].Duplicate}
		}
		b, _ := json.Marshal(wire.BatchReply{Count: n, Results: want})
		if got := appendBatchReply(nil, res); string(got) != string(b) {
			t.Errorf("%d results:\n%s\nwant\n%s", n, got, b)
		}
	}
}
