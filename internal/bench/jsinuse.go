package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/evtctl/evtctl/pkg/client"
	"github.com/evtctl/evtctl/pkg/render"
)

// Reads while the measured events are stored (JetStream in use): a live tail follows the
// stream from the events before them, and each time it has received ReplayEvery more, the
// Recent newest events it has seen are read again, oldest first (in the background, one
// replay after another: each side does the same reads, however fast it stores). The node's side is evtctl's: tail's path
// (client.Stream, pages of 100, each rendered as JSON lines to nowhere) and replay's
// (client.Range, rendered likewise); the client's side is the Go client's equivalents: an
// ordered consumer that follows the stream, and for each replay an ordered consumer that
// fetches the recent messages once and is deleted.

// recent keeps the last few positions a tail has seen.
type recent[T any] struct {
	mu    sync.Mutex
	buf   []T
	added int
}

func newRecent[T any](n int) *recent[T] { return &recent[T]{buf: make([]T, n)} }

func (r *recent[T]) add(v T) {
	r.mu.Lock()
	r.buf[r.added%len(r.buf)] = v
	r.added++
	r.mu.Unlock()
}

// span returns the oldest position kept and the newest, and how many events lie after the
// oldest up to the newest; ok is false before two positions were seen.
func (r *recent[T]) span() (from, to T, n int, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.added < 2 {
		return from, to, 0, false
	}
	kept := min(r.added, len(r.buf))
	from = r.buf[(r.added-kept)%len(r.buf)]
	to = r.buf[(r.added-1)%len(r.buf)]
	return from, to, kept - 1, true
}

// activity is the reads of one side while its measured events are stored.
type activity struct {
	ctx      context.Context // ends when a read fails, or the reads are ended
	cancel   context.CancelFunc
	g        *errgroup.Group
	tailed   atomic.Int64 // events the tail received
	replayed atomic.Int64 // recent replays done
	notifier              // signalled when the tail receives events, or a replay is done
}

func newActivity(ctx context.Context) (*activity, context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	g, gctx := errgroup.WithContext(ctx)
	return &activity{ctx: gctx, cancel: cancel, g: g}, gctx
}

func (a *activity) received(n int) {
	a.tailed.Add(int64(n))
	a.signal()
}

// replays runs fn each time the tail has received every more events, one after another,
// until ctx ends or it has run for want events.
func (a *activity) replays(ctx context.Context, every, want int, fn func(context.Context) error) {
	a.g.Go(func() error {
		for next := every; next <= want; next += every {
			for {
				ch := a.changed()
				if a.tailed.Load() >= int64(next) {
					break
				}
				select {
				case <-ctx.Done():
					return nil
				case <-ch:
				}
			}
			if err := fn(ctx); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			a.replayed.Add(1)
			a.signal()
		}
		return nil
	})
}

// stop waits until the tail has received want events and the replays due are done (at
// most a minute), and ends the reads.
func (a *activity) stop(ctx context.Context, want int, replays int) error {
	deadline := time.NewTimer(time.Minute)
	defer deadline.Stop()
	var err error
	for err == nil {
		ch := a.changed()
		if a.tailed.Load() >= int64(want) && a.replayed.Load() >= int64(replays) {
			break
		}
		select {
		case <-ch:
		case <-deadline.C:
			err = fmt.Errorf("within a minute of the last event stored, the live tail received %d events of %d and %d replays of %d were done",
				a.tailed.Load(), want, a.replayed.Load(), replays)
		case <-ctx.Done():
			err = ctx.Err()
		case <-a.ctx.Done(): // a read failed: Wait says how
			if err = a.g.Wait(); err == nil {
				err = a.ctx.Err()
			}
		}
	}
	a.cancel()
	if gerr := a.g.Wait(); gerr != nil && err == nil {
		err = gerr
	}
	if n := a.tailed.Load(); err == nil && n != int64(want) {
		err = fmt.Errorf("the live tail received %d events, not %d", n, want)
	}
	return err
}

// nodeActivity starts the node's reads: a live tail after the cursor newest ("": from the
// start) and the recent replays.
func nodeActivity(ctx context.Context, c *client.Client, newest string, cfg JetStreamConfig) (*activity, error) {
	rd, err := render.New(io.Discard, render.Options{Format: "jsonl"})
	if err != nil {
		return nil, err
	}
	a, ctx := newActivity(ctx)
	seen := newRecent[string](cfg.Recent + 1)
	if newest != "" {
		seen.add(newest)
	}
	so := client.StreamOptions{After: newest, FromStart: newest == "", PageSize: 100, Wait: 25 * time.Second, ReuseMemory: true}
	a.g.Go(func() error {
		err := c.Stream(ctx, so, func(b client.Batch) error {
			for _, it := range b.Items {
				if err := rd.Item(it); err != nil {
					return err
				}
				seen.add(strings.Clone(it.Cursor))
			}
			if err := rd.Flush(); err != nil {
				return err
			}
			a.received(len(b.Items))
			return nil
		})
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("the live tail: %w", err)
	})
	a.replays(ctx, cfg.ReplayEvery, cfg.Events, func(ctx context.Context) error {
		from, to, want, ok := seen.span()
		if !ok {
			return nil
		}
		n, _, _, err := replayOnce(ctx, c, ReplayConfig{PageSize: 1000}, "", client.Position{Cursor: from}, client.Position{Cursor: to}, false, nil)
		if err != nil {
			return fmt.Errorf("a replay of recent events: %w", err)
		}
		if n != want {
			return fmt.Errorf("a replay of the %d recent events from %s to %s read %d", want, from, to, n)
		}
		return nil
	})
	return a, nil
}

// rawActivity starts the Go client's reads on stream: a live tail after sequence after, and
// the recent replays.
func rawActivity(ctx context.Context, js jetstream.JetStream, stream string, after uint64, cfg JetStreamConfig) (*activity, error) {
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: after + 1})
	if err != nil {
		return nil, err
	}
	it, err := cons.Messages()
	if err != nil {
		return nil, err
	}
	a, ctx := newActivity(ctx)
	seen := newRecent[uint64](cfg.Recent + 1)
	if after > 0 {
		seen.add(after)
	}
	a.g.Go(func() error {
		defer it.Stop()
		for {
			m, err := it.Next(jetstream.NextContext(ctx))
			if ctx.Err() != nil {
				return nil
			}
			if err != nil {
				return fmt.Errorf("the Go client's live tail: %w", err)
			}
			md, err := m.Metadata()
			if err != nil {
				return err
			}
			if _, err := io.Discard.Write(m.Data()); err != nil {
				return err
			}
			seen.add(md.Sequence.Stream)
			a.received(1)
		}
	})
	a.replays(ctx, cfg.ReplayEvery, cfg.Events, func(ctx context.Context) error {
		from, to, want, ok := seen.span()
		if !ok {
			return nil
		}
		cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: from + 1})
		if err != nil {
			return err
		}
		defer func() {
			if info := cons.CachedInfo(); info != nil {
				_ = js.DeleteConsumer(context.WithoutCancel(ctx), stream, info.Name)
			}
		}()
		b, err := cons.Fetch(want)
		if err != nil {
			return err
		}
		n := 0
		for m := range b.Messages() {
			if _, err := io.Discard.Write(m.Data()); err != nil {
				return err
			}
			n++
		}
		if err := b.Error(); err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
		if n != want {
			return fmt.Errorf("the Go client's replay of the %d recent messages %d to %d read %d", want, from+1, to, n)
		}
		return nil
	})
	return a, nil
}
