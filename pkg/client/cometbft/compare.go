package cometbft

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// ReadRate is what reading a range of heights took.
type ReadRate struct {
	Heights int64
	Items   int64 // items (the plain loop: one per height and one per transaction)
	Events  int64 // ABCI events within them
	Elapsed time.Duration
}

// HeightsPerSecond is the rate of heights.
func (r ReadRate) HeightsPerSecond() float64 { return perSecond(r.Heights, r.Elapsed) }

// EventsPerSecond is the rate of ABCI events.
func (r ReadRate) EventsPerSecond() float64 { return perSecond(r.Events, r.Elapsed) }

func perSecond(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// ReadComparison sets a Reader's read of a range of heights beside a plain loop of
// block_results and block calls over the same heights, with as many calls in flight.
type ReadComparison struct {
	From, To    int64
	Concurrency int
	Reader      ReadRate
	Plain       ReadRate
}

// Ratio is the Reader's rate of heights over the plain loop's.
func (c ReadComparison) Ratio() float64 {
	p := c.Plain.HeightsPerSecond()
	if p == 0 {
		return 0
	}
	return c.Reader.HeightsPerSecond() / p
}

// CompareRead reads heights from to to (inclusive) of the node at opts.Node, rounds times
// each way, alternately: with a new Reader (opts' concurrency, forward pages of pageItems
// items, each item's events counted), and with a plain loop in which opts.Concurrency
// workers each call block_results and then block for one height after another, decode
// both with encoding/json and count the events. The rates add up the rounds. Both fail on
// the first error; the plain loop retries nothing either.
func CompareRead(ctx context.Context, opts Options, from, to int64, pageItems, rounds int) (ReadComparison, error) {
	if opts.Concurrency <= 0 {
		opts.Concurrency = DefaultConcurrency
	}
	if from < 1 || to < from {
		return ReadComparison{}, fmt.Errorf("no heights from %d to %d", from, to)
	}
	c := ReadComparison{From: from, To: to, Concurrency: opts.Concurrency}
	for range max(rounds, 1) {
		rr, err := readWithReader(ctx, opts, from, to, pageItems)
		if err != nil {
			return c, fmt.Errorf("the reader: %w", err)
		}
		pr, err := readPlainOpts(ctx, opts, from, to)
		if err != nil {
			return c, fmt.Errorf("the plain loop: %w", err)
		}
		c.Reader.add(rr)
		c.Plain.add(pr)
	}
	return c, nil
}

func (r *ReadRate) add(o ReadRate) {
	r.Heights += o.Heights
	r.Items += o.Items
	r.Events += o.Events
	r.Elapsed += o.Elapsed
}

func readWithReader(ctx context.Context, opts Options, from, to int64, pageItems int) (ReadRate, error) {
	r, err := New(opts)
	if err != nil {
		return ReadRate{}, err
	}
	defer r.Close()
	rate := ReadRate{Heights: to - from + 1}
	start := time.Now()
	after := EndOf(from - 1)
	for after.Compare(EndOf(to)) < 0 {
		p, err := r.Forward(ctx, PageRequest{After: after, Max: pageItems})
		if err != nil {
			return rate, err
		}
		if p.Next.Compare(after) <= 0 {
			return rate, fmt.Errorf("the chain ends at %v, before height %d", p.Next, to)
		}
		for _, it := range p.Items {
			pos, _ := ParseCursor(it.Cursor)
			if pos.Height > to {
				break
			}
			rate.Items++
			path := "value.result.events.#"
			if pos.Index == 0 {
				path = "value.events.#"
			}
			rate.Events += jsonOf(it.Data).Get(path).Int()
		}
		after = p.Next
	}
	rate.Elapsed = time.Since(start)
	return rate, nil
}

// plainEvent is an ABCI event as the plain loop decodes it.
type plainEvent struct {
	Type       string `json:"type"`
	Attributes []struct {
		Key   string `json:"key"`
		Value string `json:"value"`
	} `json:"attributes"`
}

func readPlainOpts(ctx context.Context, opts Options, from, to int64) (ReadRate, error) {
	c, err := newRPC(opts)
	if err != nil {
		return ReadRate{}, err
	}
	return readPlain(ctx, c, opts.Concurrency, from, to)
}

// readPlain is the plain loop: conc workers, each calling block_results and then block for
// one height after another, from to to, decoding both with encoding/json and counting the
// items and ABCI events they hold.
func readPlain(ctx context.Context, c *rpc, conc int, from, to int64) (ReadRate, error) {
	rate := ReadRate{Heights: to - from + 1}
	var next, items, events atomic.Int64
	next.Store(from)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
		cancel()
	}
	start := time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				h := next.Add(1) - 1
				if h > to || ctx.Err() != nil {
					return
				}
				res, err := plainCall[plainResults](ctx, c, "block_results", h)
				if err != nil {
					fail(err)
					return
				}
				blk, err := plainCall[plainBlock](ctx, c, "block", h)
				if err != nil {
					fail(err)
					return
				}
				n := int64(len(res.Finalize) + len(res.Begin) + len(res.End))
				for _, tr := range res.TxsResults {
					n += int64(len(tr.Events))
				}
				items.Add(1 + int64(len(blk.Block.Data.Txs)))
				events.Add(n)
			}
		}()
	}
	wg.Wait()
	rate.Elapsed = time.Since(start)
	rate.Items, rate.Events = items.Load(), events.Load()
	return rate, firstErr
}

// plainResults and plainBlock are what the plain loop decodes of block_results and block.
type plainResults struct {
	TxsResults []struct {
		Events []plainEvent `json:"events"`
	} `json:"txs_results"`
	Finalize []plainEvent `json:"finalize_block_events"`
	Begin    []plainEvent `json:"begin_block_events"`
	End      []plainEvent `json:"end_block_events"`
}

type plainBlock struct {
	Block struct {
		Data struct {
			Txs [][]byte `json:"txs"`
		} `json:"data"`
	} `json:"block"`
}

// plainCall is what a plain program does: POST the call, read the reply, decode it.
func plainCall[T any](ctx context.Context, c *rpc, method string, h int64) (*T, error) {
	body, _ := json.Marshal(rpcRequest{JSONRPC: "2.0", ID: 1, Method: method, Params: map[string]string{"height": strconv.FormatInt(h, 10)}})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var reply struct {
		Error *struct {
			Data string `json:"data"`
		} `json:"error"`
		Result T `json:"result"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&reply); err != nil {
		return nil, err
	}
	if reply.Error != nil {
		return nil, errors.New(reply.Error.Data)
	}
	return &reply.Result, nil
}
