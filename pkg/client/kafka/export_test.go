package kafka

import "github.com/twmb/franz-go/pkg/kgo"

// ItemOf makes the item of one record, as a forward page does (for benchmarks).
func ItemOf(r *kgo.Record, query string) (Item, bool) {
	if benchMatcher == nil || benchMatcher.src != query {
		m, err := compileQuery(query)
		if err != nil {
			panic(err)
		}
		benchMatcher = m
	}
	b, ok := benchDecoder.build(r, benchMatcher)
	if !ok {
		return Item{}, false
	}
	return itemOf(b, ""), true
}

var (
	benchDecoder = newDecoder("measure")
	benchMatcher *matcher
)
