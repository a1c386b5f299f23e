package emit

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"golang.org/x/time/rate"

	"github.com/evtctl/evtctl/internal/english"
	"github.com/evtctl/evtctl/pkg/client/kafka"
)

// KafkaConfig is a run that produces its events to a Kafka topic in the binary mode of the
// Open edX producer (see kafka.Produce), with an idempotent producer whose records every
// in-sync replica acknowledges.
type KafkaConfig struct {
	Topic   kafka.Config
	Produce kafka.ProduceOptions
	// Events yields the events, each with its number; its error is io.EOF when there are
	// no more.
	Events func() (ev []byte, n int, err error)
	// Limiter, when set, paces the events.
	Limiter *rate.Limiter
	// Acks writes the lines of the records the topic took and counts them; nil: JSON
	// lines, discarded.
	Acks *Acks
}

// kafkaAck is the JSON line of a record the topic took.
type kafkaAck struct {
	ID        string `json:"id"`
	Cursor    string `json:"cursor"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

// RunKafka produces the events of cfg to its topic.
func RunKafka(ctx context.Context, cfg KafkaConfig) (Result, error) {
	acks := cfg.Acks
	if acks == nil {
		acks = NewAcks(io.Discard, AckOptions{JSON: true})
	}
	next := cfg.Events
	if lim := cfg.Limiter; lim != nil {
		read := next
		next = func() ([]byte, int, error) {
			ev, n, err := read()
			if err == nil {
				err = lim.Wait(ctx)
			}
			return ev, n, err
		}
	}
	n, err := kafka.Produce(ctx, cfg.Topic, cfg.Produce, next, func(p kafka.Produced) {
		acks.ReportOne(func(jsonOut bool) []byte {
			if jsonOut {
				line, _ := json.Marshal(kafkaAck{ID: p.ID, Cursor: p.Cursor(), Partition: p.Partition, Offset: p.Offset})
				return append(line, '\n')
			}
			return fmt.Appendf(nil, "sent %s at %s (partition %d, offset %d)\n", acks.safe(p.ID), p.Cursor(), p.Partition, p.Offset)
		})
	})
	var res Result
	res.Sent, res.Duplicates, res.Requests = acks.Counts()
	if err != nil {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		if n > 0 {
			return res, fmt.Errorf("%w (%s produced before it, to %s)", err, english.Plural(n, "event"), cfg.Topic.Node())
		}
		return res, err
	}
	return res, nil
}
