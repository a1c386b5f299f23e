package jetstream

import (
	"testing"

	"github.com/nats-io/nats.go"
)

// ackInfo reads both forms of a delivered message's reply subject, and nothing else.
func TestAckInfo(t *testing.T) {
	for _, c := range []struct {
		reply      string
		sseq, dseq uint64
		ts         int64
		ok         bool
	}{
		{"$JS.ACK.S.c1.1.42.7.1764300000000000000.3", 42, 7, 1764300000000000000, true},
		{"$JS.ACK._.AHASH.S.c1.1.42.7.1764300000000000000.3.x9", 42, 7, 1764300000000000000, true},
		{"$JS.ACK.hub.AHASH.S.c1.2.42.7.1764300000000000000.3", 42, 7, 1764300000000000000, true},
		{"$JS.ACK.hub.AHASH.S.c1.2.42.7.1764300000000000000.3.x9.more", 42, 7, 1764300000000000000, true},
		{"$JS.ACK.S.c1.1.42.7.1764300000000000000", 0, 0, 0, false},     // a token short
		{"$JS.ACK.x.S.c1.1.42.7.1764300000000000000.3", 0, 0, 0, false}, // neither form
		{"$JS.ACK.S.c1.1.4x.7.1764300000000000000.3", 0, 0, 0, false},
		{"$JS.ACK.S.c1.1.42.-7.1764300000000000000.3", 0, 0, 0, false},
	} {
		sseq, dseq, ts, ok := ackInfo(c.reply)
		if sseq != c.sseq || dseq != c.dseq || ts != c.ts || ok != c.ok {
			t.Errorf("ackInfo(%q) = %d, %d, %d, %v; want %d, %d, %d, %v", c.reply, sseq, dseq, ts, ok, c.sseq, c.dseq, c.ts, c.ok)
		}
	}
}

// What ackInfo reads from a reply subject, nats.go reads alike.
func FuzzAckInfo(f *testing.F) {
	f.Add("S.c1.1.42.7.1764300000000000000.3")
	f.Add("_.AHASH.S.c1.1.42.7.1764300000000000000.3.x9")
	f.Add("hub.AHASH.S.c1.2.42.7.1764300000000000000.3")
	f.Add("S.c1.1.42.7")
	f.Fuzz(func(t *testing.T, rest string) {
		reply := ackPrefix + rest
		sseq, dseq, ts, ok := ackInfo(reply)
		if !ok {
			return
		}
		md, err := (&nats.Msg{Reply: reply, Sub: &nats.Subscription{}}).Metadata()
		if err != nil {
			t.Fatalf("ackInfo(%q) = %d, %d, %d; nats.go: %v", reply, sseq, dseq, ts, err)
		}
		if md.Sequence.Stream != sseq || md.Sequence.Consumer != dseq || md.Timestamp.UnixNano() != ts {
			t.Fatalf("ackInfo(%q) = %d, %d, %d; nats.go reads %d, %d, %d", reply, sseq, dseq, ts, md.Sequence.Stream, md.Sequence.Consumer, md.Timestamp.UnixNano())
		}
	})
}
