package emit

import (
	"context"
	"errors"
	"io"
	"time"

	"golang.org/x/time/rate"

	"github.com/evtctl/evtctl/internal/deliver"
	"github.com/evtctl/evtctl/internal/retry"
	"github.com/evtctl/evtctl/pkg/client"
	"github.com/evtctl/evtctl/pkg/client/redisstream"
)

// RedisEntriesPerSend is how many entries one transaction adds by default.
const RedisEntriesPerSend = 100

// RedisConfig is a run that adds its events to a Redis stream as entries, as the Open edX
// event bus writes them (see redisstream.EntryFields), in order.
type RedisConfig struct {
	Producer *redisstream.Producer
	// Events yields the events, each with its number; its error is io.EOF when there are
	// no more.
	Events func() (ev []byte, n int, err error)
	// BatchSize is how many entries one transaction adds; 0: RedisEntriesPerSend. With a
	// Rate, one.
	BatchSize int
	Rate      float64 // events per second, spread evenly; 0: as fast as the server takes them
	// Timeout limits one attempt; MaxAttempts is how many are made of a transaction whose
	// failure waiting may mend, the first included.
	Timeout     time.Duration
	MaxAttempts int
	// OnRetry, when set, is told of each failed attempt that will be tried again.
	OnRetry func(attempt int, delay time.Duration, err error)
	// Acks writes the lines of the entries added and counts them; nil: JSON lines,
	// discarded.
	Acks *Acks
}

// EntryError is an event that cannot be a stream entry.
type EntryError struct {
	Event []byte
	Num   int // its number (see RedisConfig.Events)
	Err   error
}

func (e *EntryError) Error() string { return e.Err.Error() }
func (e *EntryError) Unwrap() error { return e.Err }

// RunRedis adds the events of cfg to the stream, in order, and reports each added one. Its
// error is the result's SendErr (an *EntryError for an event that cannot be an entry),
// else its ReadErr.
func RunRedis(ctx context.Context, cfg RedisConfig) (Result, error) {
	acks := cfg.Acks
	if acks == nil {
		acks = NewAcks(io.Discard, AckOptions{JSON: true})
	}
	group := RedisEntriesPerSend
	if cfg.BatchSize > 0 {
		group = cfg.BatchSize
	}
	var lim *rate.Limiter
	if cfg.Rate > 0 {
		// Spread evenly: one entry a transaction.
		lim, group = rate.NewLimiter(rate.Limit(cfg.Rate), 1), 1
	}
	var sendErr, readErr error
	for done := false; !done && sendErr == nil; {
		var b Group
		for len(b.Events) < group {
			ev, n, err := cfg.Events()
			if err == io.EOF {
				done = true
				break
			}
			if err != nil {
				readErr, done = err, true
				break
			}
			b.Events, b.Nums = append(b.Events, ev), append(b.Nums, n)
		}
		if len(b.Events) == 0 {
			break
		}
		if lim != nil {
			if err := lim.Wait(ctx); err != nil {
				sendErr = err
				break
			}
		}
		ids, err := sendRedis(ctx, cfg, b.Events)
		res := make([]deliver.Result, 0, len(ids))
		for _, id := range ids {
			if id == "" {
				break
			}
			res = append(res, deliver.Result{Cursor: id})
		}
		if rerr := acks.Report(b.Events, res); err == nil && rerr != nil {
			err = rerr
		}
		if err != nil {
			var ee *redisstream.EventError
			if errors.As(err, &ee) {
				err = &EntryError{Event: b.Events[ee.Index], Num: b.Nums[ee.Index], Err: ee.Err}
			}
			sendErr = err
		}
	}
	var res Result
	res.Sent, res.Duplicates, res.Requests = acks.Counts()
	res.SendErr, res.ReadErr = sendErr, readErr
	if sendErr != nil {
		return res, sendErr
	}
	return res, readErr
}

// sendRedis adds events in one transaction, trying again, up to MaxAttempts in all, while
// the failure is one that waiting may mend. A transaction that failed added nothing; one
// whose answer was lost may have, and is sent again: the entries then hold the events
// twice, with the same ids.
func sendRedis(ctx context.Context, cfg RedisConfig, events [][]byte) ([]string, error) {
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, cfg.Timeout)
		ids, err := cfg.Producer.Send(actx, events)
		cancel()
		if err == nil || ctx.Err() != nil || !client.Retryable(err) || attempt >= cfg.MaxAttempts {
			return ids, err
		}
		d := retry.Delay(attempt-1, 200*time.Millisecond, 15*time.Second)
		if cfg.OnRetry != nil {
			cfg.OnRetry(attempt, d, err)
		}
		if err := retry.Sleep(ctx, d); err != nil {
			return ids, err
		}
	}
}
