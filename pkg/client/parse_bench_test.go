package client

import (
	"bytes"
	"fmt"
	"testing"
)

// A page of 1,000 items of about 600 bytes, as an evtctl node writes it: the reply of the
// events method and the lines of its stream.
func benchPage() (reply, lines []byte) {
	var items, ls bytes.Buffer
	for i := range 1000 {
		e := paddedEvent("bench.event", 600)
		it := fmt.Sprintf(`{"cursor":"18ea61a27c39%04x-%016x","event":"bench.event","data":%s}`, i, i+1, cloudEventJSON(e))
		if i > 0 {
			items.WriteByte(',')
		}
		items.WriteString(it)
		ls.WriteString(it + "\n")
	}
	reply = fmt.Appendf(nil, `{"jsonrpc":"2.0","id":1,"result":{"items":[%s],"more":true,"oldest":"18ea61a27c390000-0000000000000001","newest":"18ea61a27c39ffff-00000000000fffff","order":"asc"}}`, items.Bytes())
	return reply, ls.Bytes()
}

// BenchmarkParseReply: the client's decoder of an events reply.
func BenchmarkParseReply(b *testing.B) {
	reply, _ := benchPage()
	b.SetBytes(int64(len(reply)))
	for b.Loop() {
		r, err := parseReply(reply)
		if err != nil || len(r.Items) != 1000 {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseStream: the client's reader of a stream's lines.
func BenchmarkParseStream(b *testing.B) {
	_, lines := benchPage()
	b.SetBytes(int64(len(lines)))
	items := make([]Item, 0, 1000)
	for b.Loop() {
		var sc streamScanner
		got, end, err := sc.parse(lines, items[:0])
		if err != nil || end != nil || len(got) != 1000 {
			b.Fatal(len(got), err)
		}
	}
}
