package server

import "testing"

// BenchmarkDecodeCall decodes request bodies as the node receives them: the long-poll that
// evtctl's client sends over and over (taken by the fast decoder), a Tendermint client's call
// with a filter, and a call whose member names differ in case (both decoded by the general
// decoder).
func BenchmarkDecodeCall(b *testing.B) {
	for _, bc := range []struct{ name, body string }{
		{"poll", `{"jsonrpc":"2.0","id":7,"method":"events","params":{"maxItems":1,"after":"18ea61a27c39abd8-0000000000000001","waitTime":30000000000}}`},
		{"filter", `{"jsonrpc":"2.0","id":7,"method":"events","params":{"filter":{"query":"tm.event = 'Tx'"},"maxItems":10,"after":"18ea61a27c39abd8-00c7","waitTime":2000000000}}`},
		{"case", `{"jsonrpc":"2.0","id":7,"method":"events","params":{"maxitems":1,"after":"18ea61a27c39abd8-0000000000000001","waittime":30000000000}}`},
	} {
		raw := []byte(bc.body)
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, rerr := decodeCall(raw); rerr != nil {
					b.Fatal(rerr.Data)
				}
			}
		})
	}
}
