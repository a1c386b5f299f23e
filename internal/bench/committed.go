package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/evtctl/evtctl/pkg/client"
)

// A committer is a source whose log takes items through its own API and stamps when it
// committed each (a chain: transactions, committed in blocks). Against such a log, bench
// latency sends the items itself and times each from its commit to the tail's output: what
// a reader of the log meets, whatever the log took to commit it.
type committer interface {
	// Submit puts an item that carries mark, of about size bytes, into the log, returning
	// once the log has taken it (not once it is committed).
	Submit(ctx context.Context, mark string, size int) error
	// Mark is the mark an item Submit put in carries, "" for any other.
	Mark(it client.Item) string
	// Committed returns when the log committed the item at pos, and how long after the
	// commit before it (a chain: the block time then).
	Committed(ctx context.Context, pos string) (at time.Time, blockTime time.Duration, err error)
}

// committedFigures reports a latency run against a committer: for each measured item, the
// time from its commit to its receipt by the tail, beside the time from its sending; the
// goal is the block time measured in the run plus GoalCommitP99MarginMs.
func committedFigures(ctx context.Context, r *Report, cfg LatencyConfig, com committer, tr *tracker, warm, total, sent int, sendElapsed time.Duration) (*Report, error) {
	var lat, ack, fromSend, blockTimes samples
	blocks := map[int64]bool{} // by commit time: a block's items share it
	missing, early := 0, 0
	for seq := warm + 1; seq <= total; seq++ {
		a, rcv, sendAt := tr.ack[seq].Load(), tr.recv[seq].Load(), tr.sent[seq].Load()
		if a == 0 {
			continue // not taken (interrupted before)
		}
		ack.add(time.Duration(a - sendAt))
		if rcv == 0 {
			missing++
			continue
		}
		fromSend.add(time.Duration(rcv - sendAt))
		at, bt, err := com.Committed(ctx, tr.cursor[seq])
		if err != nil {
			if interrupted(ctx, err) {
				break
			}
			return nil, fmt.Errorf("when the log committed %s: %w", tr.cursor[seq], err)
		}
		if !blocks[at.UnixNano()] {
			blocks[at.UnixNano()] = true
			if bt > 0 {
				blockTimes.add(bt)
			}
		}
		d := time.Duration(rcv - at.UnixNano())
		if d < 0 {
			early++
			d = 0
		}
		lat.add(d)
	}
	r.finish(ctx)
	blockTime := blockTimes.percentile(50)
	r.figure("events_measured", float64(lat.len()), "events")
	r.figure("rate_achieved", float64(sent)/max(sendElapsed.Seconds(), 1e-9), "events/s")
	r.figure("blocks", float64(len(blocks)), "blocks")
	r.figure("block_time", ms(blockTime), "ms")
	r.figure("latency_p50", ms(lat.percentile(50)), "ms")
	r.figure("latency_p90", ms(lat.percentile(90)), "ms")
	r.goal("latency_p99", ms(lat.percentile(99)), "ms", "<=", ms(blockTime)+GoalCommitP99MarginMs)
	r.figure("latency_max", ms(lat.max()), "ms")
	r.latencies("from_send", &fromSend)
	r.latencies("ack", &ack)
	r.figure("duplicates_received", float64(tr.dups.Load()), "events")
	r.figure("missing", float64(missing), "events")
	r.note("latency: from each item's commit, as the log stamps it (a chain: the time in the validators' precommit votes for its block, " +
		"their clocks), to its line written out by a tail that follows the log as evtctl tail does; from_send: from the bench's sending " +
		"of the item, which includes the wait for a block to take it; ack: the log's taking it. The commit is timed by the log's clock, " +
		"the line by the bench's: on one machine they are one clock, against a remote node their difference adds to latency_*")
	r.note("latency_p99's goal: the block time measured in the run (the median time between the commits of the blocks that held the items and of the blocks before them) plus %d ms", GoalCommitP99MarginMs)
	if early > 0 {
		r.note("%d items were written out before their commit by the log's clock: its clock runs ahead of the bench's; they count as 0 ms", early)
	}
	if achieved := float64(sent) / max(sendElapsed.Seconds(), 1e-9); ctx.Err() == nil && achieved < 0.95*cfg.Rate {
		r.note("sending fell behind the rate asked for (%.0f of %.0f items/s): the log's slow takings held all %d requests in flight; raise --concurrency", achieved, cfg.Rate, cfg.Concurrency)
	}
	if missing > 0 && ctx.Err() == nil {
		return r, fmt.Errorf("%d items the log took never reached the tail within %s of the last", missing, cfg.Drain)
	}
	if d := tr.dups.Load(); d > 0 {
		return r, fmt.Errorf("the tail received %d items more than once", d)
	}
	return r, ctx.Err()
}
