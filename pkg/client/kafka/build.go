package kafka

import (
	"runtime"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/evtctl/evtctl/pkg/client"
)

// A page read without a filter has an item for every record it takes, so it takes them
// first (a merge by timestamp that costs little) and builds their items after: records to
// CloudEvents, the most work a reader does. A page of many records builds them on several
// cores at once, each with a decoder and memory of its own, while the client fetches the
// next records and the caller writes the page before; the items keep the page's order.

// batch is the records a page took, and each one's position text.
type batch struct {
	recs []*kgo.Record
	pos  []string
}

func (b *batch) reset() {
	clear(b.recs)
	b.recs, b.pos = b.recs[:0], b.pos[:0]
}

func (b *batch) add(r *kgo.Record, pos string) {
	b.recs = append(b.recs, r)
	b.pos = append(b.pos, pos)
}

// minShare is the fewest records worth a core of their own.
const minShare = 128

// maxBuilders bounds the cores a page's items are built on.
const maxBuilders = 4

// build appends the items of b's records to items, built on as many cores as pay, and
// returns the arenas that hold them beside the page's own (f.dec's), to be released with
// the page. b is left empty.
func (f *forward) build(b *batch, m *matcher, items []client.Item, reuse bool) ([]client.Item, []*arena) {
	defer b.reset()
	n := len(b.recs)
	workers := min(runtime.GOMAXPROCS(0), maxBuilders, n/minShare)
	if workers <= 1 {
		for i, r := range b.recs {
			bl, ok := f.dec.build(r, m)
			if ok {
				items = append(items, itemOf(bl, b.pos[i]))
			}
		}
		return items, nil
	}
	for len(f.decs) < workers-1 {
		f.decs = append(f.decs, newDecoder(f.dec.topic))
	}
	start := len(items)
	items = append(items, make([]client.Item, n)...)
	out := items[start:]
	more := make([]*arena, workers-1)
	share := (n + workers - 1) / workers
	work := func(dec *decoder, lo, hi int) {
		for i := lo; i < hi; i++ {
			bl, _ := dec.build(b.recs[i], m) // every record is an item: no filter
			out[i] = itemOf(bl, b.pos[i])
		}
	}
	var wg sync.WaitGroup
	for w := 1; w < workers; w++ {
		dec := f.decs[w-1]
		more[w-1] = &arena{reuse: reuse}
		dec.mem = more[w-1]
		wg.Add(1)
		go func() {
			defer wg.Done()
			work(dec, w*share, min(n, (w+1)*share))
		}()
	}
	work(f.dec, 0, min(n, share)) // this goroutine's share
	wg.Wait()
	return items, more
}
