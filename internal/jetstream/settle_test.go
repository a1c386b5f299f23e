package jetstream

import (
	"context"
	"errors"
	"testing"

	"github.com/nats-io/nats.go"
)

// A sparsely answered run cut short by a failed send (a lost connection, no room): the
// messages sent after the last one that asked for an answer may or may not be stored, so
// they fail with the reason the run stopped; they are not taken as stored.
func TestSettleARunCutShort(t *testing.T) {
	msgs := make([]*nats.Msg, 12)
	for i := range msgs {
		msgs[i] = &nats.Msg{Header: nats.Header{hdrMsgID: []string{"k:/s " + string(rune('a'+i))}}}
	}
	cut := errors.New("the connection failed")
	cs := &chainSend{msgs: msgs, every: 4, after: 100, sent: 10, err: cut}
	res := make([]pubResult, len(msgs))
	res[3] = pubResult{ack: ack{seq: 104}, answered: true}
	res[7] = pubResult{ack: ack{seq: 108}, answered: true}
	cs.settle(context.Background(), res)
	for i := range 8 {
		if res[i].err != nil || res[i].seq != 101+uint64(i) {
			t.Fatalf("message %d: %+v, want stored at %d", i, res[i], 101+i)
		}
	}
	for i := 8; i < 10; i++ {
		if !errors.Is(res[i].err, cut) {
			t.Fatalf("message %d, sent after the last answered one: %+v, want the run's error", i, res[i])
		}
	}
}
