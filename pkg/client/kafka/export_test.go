package kafka

import (
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/evtctl/evtctl/pkg/client"
)

// ItemOf makes the item of one record, as a forward page does (for benchmarks).
func ItemOf(r *kgo.Record, query string) (client.Item, bool) {
	if benchMatcher == nil || benchMatcher.src != query {
		m, err := compileQuery(query)
		if err != nil {
			panic(err)
		}
		benchMatcher = m
	}
	b, ok := benchDecoder.build(r, benchMatcher)
	if !ok {
		return client.Item{}, false
	}
	return itemOf(b, ""), true
}

var (
	benchDecoder = newDecoder("measure")
	benchMatcher *matcher
)
