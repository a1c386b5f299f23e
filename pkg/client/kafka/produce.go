package kafka

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/gjson"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/evtctl/evtctl/internal/cevent"
)

// Records that Produce writes are CloudEvents in the Kafka binary mode, with the Open edX
// producer's conventions: every attribute in a ce_ header (ce_specversion, ce_id,
// ce_source, ce_type, ce_time, …, and the extensions, whose values are written as text),
// except sourcehost, which goes in a bare sourcehost header as that producer writes it;
// datacontenttype in both content-type and ce_datacontenttype (application/json when the
// event has data but no datacontenttype); the data as the value: JSON as its text, a
// string as its text, data_base64 as its bytes; an event without data has an empty value.
// The key is the event's subject, when it has one, so that the events of one subject stay
// in one partition in order; others have no key.

// ProduceOptions tune Produce.
type ProduceOptions struct {
	// Timeout bounds how long the cluster may take to accept a record, retries included
	// (default 2 minutes).
	Timeout time.Duration
}

// Produced is an event the cluster accepted.
type Produced struct {
	N         int    // the event's number, as the event source gave it
	ID, Type  string // the event's id and type
	Partition int32
	Offset    int64
}

// Cursor is the item cursor of the produced record.
func (p Produced) Cursor() string { return FormatCursor(p.Partition, p.Offset) }

// ProduceError is an event that was not produced: invalid (Invalid, final), or refused or
// lost by the cluster.
type ProduceError struct {
	N       int // the event's number
	Invalid bool
	Err     error
}

func (e *ProduceError) Error() string {
	if e.Invalid {
		return fmt.Sprintf("event %d is not a valid CloudEvent: %v", e.N, e.Err)
	}
	return fmt.Sprintf("event %d was not produced: %v", e.N, e.Err)
}

func (e *ProduceError) Unwrap() error { return e.Err }

// Produce writes the events that next yields to cfg's topic, in the binary mode described
// above, with an idempotent producer whose records all in-sync replicas must acknowledge.
// next returns one CloudEvent in the JSON format at a time with its number (a line, a
// sequence number), and io.EOF after the last; emit's event sources have this form.
// ack, when not nil, is called for each accepted event in the order next gave them.
//
// Produce returns the number of events accepted. It stops at the first error: of next
// (returned as it is), an invalid event, or a record the cluster did not take (a
// *ProduceError); the events before it that the cluster took are acknowledged.
func Produce(ctx context.Context, cfg Config, opts ProduceOptions, next func() ([]byte, int, error), ack func(Produced)) (int, error) {
	if err := cfg.Validate(); err != nil {
		return 0, err
	}
	kopts, err := cfg.clientOpts()
	if err != nil {
		return 0, err
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	kopts = append(kopts,
		kgo.DefaultProduceTopic(cfg.Topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), // and idempotent writes, franz-go's default
		kgo.RecordDeliveryTimeout(timeout),
		kgo.RetryTimeout(retryTimeout),
		kgo.UnknownTopicRetries(3),
		kgo.MaxBufferedRecords(4096),
	)
	cl, err := kgo.NewClient(kopts...)
	if err != nil {
		return 0, addrErrorf("kafka: %v", err)
	}
	defer cl.Close()

	node := cfg.Node()
	var answered atomic.Bool
	acks := &ackQueue{ack: ack}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var firstErr error
	for {
		ev, n, err := next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			firstErr = err
			break
		}
		rec, info, err := recordOf(ev)
		if err != nil {
			firstErr = &ProduceError{N: n, Invalid: true, Err: err}
			break
		}
		info.N = n
		slot := acks.add(info)
		cl.Produce(pctx, rec, func(r *kgo.Record, err error) {
			if err == nil {
				answered.Store(true)
			}
			if acks.done(slot, r, err) {
				cancel() // the first failure: stop what is in flight
			}
		})
		if acks.failed() {
			break
		}
	}
	if err := cl.Flush(ctx); err != nil && firstErr == nil && ctx.Err() != nil {
		firstErr = ctx.Err()
	}
	n, perr := acks.result()
	if perr != nil {
		pe := perr.(*ProduceError)
		pe.Err = classify(pe.Err, node, cfg.Topic, answered.Load())
		if firstErr == nil {
			firstErr = pe
		}
	}
	return n, firstErr
}

// ackQueue calls ack for accepted events in the order they were given, and keeps the first
// failure.
type ackQueue struct {
	ack func(Produced)

	mu      sync.Mutex
	pending []slotState
	base    int // the slot number of pending[0]
	acked   int
	err     error
	bad     atomic.Bool
}

type slotState struct {
	info Produced
	done bool
}

func (q *ackQueue) add(info Produced) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.pending = append(q.pending, slotState{info: info})
	return q.base + len(q.pending) - 1
}

// done records the outcome of a slot and reports whether it is the first failure.
func (q *ackQueue) done(slot int, r *kgo.Record, err error) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	first := false
	st := &q.pending[slot-q.base]
	if err != nil {
		if q.err == nil {
			q.err, first = &ProduceError{N: st.info.N, Err: err}, true
			q.bad.Store(true)
		}
		st.done = true
		st.info.Offset = -1
	} else {
		st.done = true
		st.info.Partition, st.info.Offset = r.Partition, r.Offset
	}
	// Acknowledge the accepted prefix: nothing from a failed event on.
	for len(q.pending) > 0 && q.pending[0].done && q.pending[0].info.Offset >= 0 {
		if q.ack != nil {
			q.ack(q.pending[0].info)
		}
		q.acked++
		q.pending[0] = slotState{}
		q.pending = q.pending[1:]
		q.base++
	}
	return first
}

func (q *ackQueue) failed() bool { return q.bad.Load() }

func (q *ackQueue) result() (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.acked, q.err
}

// recordOf converts a CloudEvent in the JSON format to its record (see Produce), and the
// event's id and type.
func recordOf(ev []byte) (*kgo.Record, Produced, error) {
	e, err := cevent.DecodeStructured(ev, limits)
	if err != nil {
		return nil, Produced{}, err
	}
	rec := &kgo.Record{Headers: make([]kgo.RecordHeader, 0, 10)}
	info := Produced{ID: e.ID, Type: e.Type}
	var (
		ct, dataJSON, dataStr, b64 string
		hasCT, hasData, isStr      bool
	)
	gjson.ParseBytes(e.JSON).ForEach(func(k, v gjson.Result) bool {
		switch name := k.Str; name {
		case "datacontenttype":
			ct, hasCT = v.Str, true
		case "data":
			hasData, dataJSON = true, v.Raw
			isStr, dataStr = v.Type == gjson.String, v.Str
		case "data_base64":
			b64 = v.Str
		case "sourcehost":
			rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: "sourcehost", Value: []byte(text(v))})
		default:
			if name == "subject" {
				rec.Key = []byte(v.Str)
			}
			rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: "ce_" + name, Value: []byte(text(v))})
		}
		return true
	})
	switch {
	case b64 != "":
		data, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			return nil, Produced{}, fmt.Errorf("data_base64: %w", err)
		}
		rec.Value = data
	case hasData:
		// JSON data (datacontenttype absent or JSON) as its text; a string under another
		// media type as the string.
		if isStr && hasCT && !cevent.IsJSONMediaType(ct) {
			rec.Value = []byte(dataStr)
		} else {
			rec.Value = []byte(dataJSON)
		}
		if !hasCT {
			ct, hasCT = mediaJSON, true
		}
	default:
		rec.Value = []byte{}
	}
	if hasCT {
		rec.Headers = append(rec.Headers,
			kgo.RecordHeader{Key: "content-type", Value: []byte(ct)},
			kgo.RecordHeader{Key: "ce_datacontenttype", Value: []byte(ct)})
	}
	return rec, info, nil
}

// text is an attribute's value as a header writes it: a string as it is, a number or a
// boolean as its JSON text.
func text(v gjson.Result) string {
	if v.Type == gjson.String {
		return v.Str
	}
	return v.Raw
}
