package redisstream

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/evtctl/evtctl/internal/cevent"
	"github.com/evtctl/evtctl/pkg/client"
)

// openEdXOrder is the order in which the Open edX event bus writes an entry's fields, before
// event_data.
var openEdXOrder = []string{"type", "id", "source", "time", "minorversion", "sourcehost", "sourcelib"}

// EntryFields are the fields of the entry that holds event, a CloudEvent in the JSON format,
// as the Open edX event bus writes them: type, id, source, time, minorversion, sourcehost and
// sourcelib (those the event has), its other attributes by name (specversion, 1.0, is left
// out as the bus leaves it out), and event_data, its data as bytes (see cevent.SplitBinary),
// last. Names and values alternate. The source reads such an entry back as the event.
func EntryFields(event []byte) ([]any, error) {
	attrs, data, err := cevent.SplitBinary(event)
	if err != nil {
		return nil, err
	}
	out := make([]any, 0, 2*len(attrs)+2)
	for _, name := range openEdXOrder {
		if i := slices.IndexFunc(attrs, func(a cevent.Field) bool { return a.Name == name }); i >= 0 {
			out = append(out, name, attrs[i].Value)
		}
	}
	for _, a := range attrs {
		if a.Name == "specversion" || slices.Contains(openEdXOrder, a.Name) {
			continue
		}
		out = append(out, a.Name, a.Value)
	}
	if data != nil {
		out = append(out, DataField, data)
	}
	return out, nil
}

// Producer adds events to a stream, one entry each, as the Open edX event bus does.
type Producer struct {
	*conn
}

// NewProducer returns a producer for the stream at node (see ParseAddress); opts give the
// password (Token) and TLS settings as for reading. It does not connect yet.
func NewProducer(node string, opts client.Options) (*Producer, error) {
	a, err := ParseAddress(node)
	if err != nil {
		return nil, err
	}
	c, err := dial(a, opts)
	if err != nil {
		return nil, err
	}
	return &Producer{conn: c}, nil
}

// Node is the stream's address, without its password.
func (p *Producer) Node() string { return p.node }

// Close closes the producer's connections.
func (p *Producer) Close() error { return p.rdb.Close() }

// Send adds events (CloudEvents in the JSON format) to the stream in order, in one
// transaction (MULTI/EXEC, one round trip), and returns the ids of their entries, one for
// each event: "" for one that was not added. An event that cannot be an entry is refused
// before any is sent. When an entry is not added, the error says why, and whether waiting
// may mend it (client.Retryable); a transaction that failed as a whole added none.
func (p *Producer) Send(ctx context.Context, events [][]byte) ([]string, error) {
	values := make([][]any, len(events))
	for i, ev := range events {
		v, err := EntryFields(ev)
		if err != nil {
			return nil, &EventError{Index: i, Err: err}
		}
		values[i] = v
	}
	cmds := make([]*redis.StringCmd, len(events))
	_, err := p.rdb.TxPipelined(ctx, func(pl redis.Pipeliner) error {
		for i, v := range values {
			cmds[i] = pl.XAdd(ctx, &redis.XAddArgs{Stream: p.addr.Stream, Values: v})
		}
		return nil
	})
	ids := make([]string, len(events))
	var first error
	for i, c := range cmds {
		switch {
		case c == nil:
		case c.Err() != nil:
			if first == nil {
				first = c.Err()
			}
		default:
			ids[i] = c.Val()
		}
	}
	if first == nil {
		first = err
	}
	if first == nil {
		for _, id := range ids {
			if id == "" {
				first = errors.New("the server did not answer every entry")
				break
			}
		}
	}
	if first != nil {
		return ids, p.failure(ctx, "adding entries", first)
	}
	p.ok()
	return ids, nil
}

// EventError is an event Send refuses: it cannot be an entry (see EntryFields).
type EventError struct {
	Index int // in the events given to Send
	Err   error
}

func (e *EventError) Error() string {
	return fmt.Sprintf("event %d cannot be a stream entry: %v", e.Index, e.Err)
}
func (e *EventError) Unwrap() error { return e.Err }
