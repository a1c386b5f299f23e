package redisstream_test

import (
	"context"
	"io"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/evtctl/evtctl/internal/bench"
	"github.com/evtctl/evtctl/internal/redistest"
	"github.com/evtctl/evtctl/pkg/client"
	_ "github.com/evtctl/evtctl/pkg/client/redisstream"
	"github.com/evtctl/evtctl/pkg/render"
)

// BenchmarkRangeJSONL: a chronological Range over 100,000 entries of some 600 bytes, as the
// Open edX event bus writes them, from a redis-server on loopback, 1,000 a page, each page
// rendered as JSON lines (as evtctl replay -o jsonl writes them) to io.Discard. bench redis
// sets the same path beside a plain go-redis reader.
func BenchmarkRangeJSONL(b *testing.B) {
	const total, page = 100_000, 1000
	srv := redistest.Start(b, redistest.Config{})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, DisableIdentity: true})
	defer rdb.Close()
	ctx := context.Background()
	if err := bench.FillRedisStream(ctx, rdb, "bench", total, bench.DefaultRedisEntrySize, nil); err != nil {
		b.Fatal(err)
	}
	c, err := client.New(client.Options{Node: srv.URL("bench")})
	if err != nil {
		b.Fatal(err)
	}
	rd, err := render.New(io.Discard, render.Options{Format: "jsonl"})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(total * bench.DefaultRedisEntrySize)
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		got := 0
		err := c.Range(ctx, client.RangeOptions{PageSize: page, ReuseMemory: true}, func(items []client.Item) error {
			got += len(items)
			if err := rd.Items(items); err != nil {
				return err
			}
			return rd.Flush()
		})
		if err != nil || got != total {
			b.Fatalf("Range: %d entries, %v", got, err)
		}
		n += got
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "events/s")
}
