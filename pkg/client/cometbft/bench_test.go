package cometbft

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/evtctl/evtctl/internal/cometbfttest"
	"github.com/evtctl/evtctl/pkg/client"
)

// BenchmarkCompareRead fills a v0.38 node with heights that hold transactions
// ($EVTCTL_BENCH_HEIGHTS, default 2,000; blocks every few tens of milliseconds, a few
// transactions each), then reads them with a Reader and with a plain loop of block_results
// and block calls, 8 calls in flight each way, and reports both rates and their ratio.
//
//	go test -run '^$' -bench CompareRead -benchtime 3x ./pkg/client/cometbft
func BenchmarkCompareRead(b *testing.B) {
	heights := int64(2000)
	if v, err := strconv.ParseInt(os.Getenv("EVTCTL_BENCH_HEIGHTS"), 10, 64); err == nil && v > 0 {
		heights = v
	}
	bin := cometbfttest.Need(b, "0.38", cometbfttest.KindCometBFT)
	node := cometbfttest.Start(b, bin, cometbfttest.Config{TimeoutCommit: 10 * time.Millisecond})
	ctx := context.Background()
	start, err := node.Status()
	if err != nil {
		b.Fatal(err)
	}
	from, to := start.Latest+1, start.Latest+heights
	fillCtx, stop := context.WithCancel(ctx)
	filled := make(chan error, 1)
	go func() {
		for i := 0; fillCtx.Err() == nil; i += 20 {
			var txs []string
			for j := range 20 {
				txs = append(txs, fmt.Sprintf("bench%d=%d", i+j, i+j))
			}
			if err := node.BroadcastAsync(fillCtx, txs, 4); err != nil && fillCtx.Err() == nil {
				filled <- err
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		filled <- nil
	}()
	err = node.WaitHeight(ctx, to)
	stop()
	if err != nil {
		b.Fatal(err)
	}
	if err := <-filled; err != nil {
		b.Fatal(err)
	}
	opts := Options{Options: client.Options{Node: node.URL}, Concurrency: 8}
	var total ReadComparison
	rounds := int64(0)
	for b.Loop() { // the node is filled once, however many rounds run
		rounds++
		c, err := CompareRead(ctx, opts, from, to, 1000, 1)
		if err != nil {
			b.Fatal(err)
		}
		total.Reader.add(c.Reader)
		total.Plain.add(c.Plain)
	}
	b.ReportMetric(total.Reader.HeightsPerSecond(), "heights/s")
	b.ReportMetric(total.Reader.EventsPerSecond(), "events/s")
	b.ReportMetric(total.Plain.HeightsPerSecond(), "plain-heights/s")
	b.ReportMetric(total.Plain.EventsPerSecond(), "plain-events/s")
	b.ReportMetric(total.Ratio(), "ratio")
	b.Logf("heights %d to %d: %d items, %d events a read", from, to, total.Reader.Items/rounds, total.Reader.Events/rounds)
}
