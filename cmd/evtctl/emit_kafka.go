package main

import (
	"context"

	"github.com/evtctl/evtctl/internal/emit"
	"github.com/evtctl/evtctl/pkg/client"
	"github.com/evtctl/evtctl/pkg/client/kafka"
)

// emit --to kafka://BROKER[,BROKER…]/TOPIC (or a kafka:// node) produces the events to a
// Kafka topic in the binary mode of the Open edX producer (see kafka.Produce), with an
// idempotent producer whose records every in-sync replica acknowledges. The events come
// from emit's usual sources: the flags, --count, --data, --file.

// kafkaRefusedFlags are emit's flags that shape HTTP requests, and mean nothing to Kafka.
var kafkaRefusedFlags = []string{"header-encoding", "batch-size", "header", "spool", "flush", "concurrency", "max-attempts", "signal", "signal-format"}

// kafkaTarget is the topic emit produces to: --to kafka://…, or the node when it is a
// kafka:// address and no other target is given; ok is false for any other target. A
// context's options go with its own node only, as its tokens do.
func (o *emitOptions) kafkaTarget() (cfg kafka.Config, ok bool, err error) {
	if o.Signal != "" || o.Flush != "" || o.To != "" && !kafka.IsAddress(o.To) {
		return kafka.Config{}, false, nil
	}
	ns, err := o.node.settings()
	if err != nil {
		return kafka.Config{}, false, err
	}
	opts := client.Options{Token: ns.IngestToken, CAFile: ns.CAFile, Insecure: ns.Insecure, Settings: ns.Options}
	node, from := ns.Node, "--node"
	if o.To != "" {
		node, from = o.To, "--to"
		opts = client.Options{Token: o.node.Token, CAFile: o.node.CAFile, Insecure: o.node.Insecure}
		if sameNode(ns.Node, o.To) {
			opts.Settings = ns.Options
		}
	}
	if !kafka.IsAddress(node) {
		return kafka.Config{}, false, nil
	}
	if cfg, err = kafka.ConfigFor(node, opts); err != nil {
		return kafka.Config{}, true, usagef("%s: %v", from, err)
	}
	for _, f := range kafkaRefusedFlags {
		if o.node.flags != nil && o.node.flags.Changed(f) {
			return kafka.Config{}, true, usagef("--%s does not apply to a Kafka topic: emit produces each event as a record, in binary mode", f)
		}
	}
	if o.node.flags != nil && o.node.flags.Changed("mode") && o.Mode != "binary" {
		return kafka.Config{}, true, usagef("a Kafka topic takes events in binary mode (the Open edX producer's headers); --mode %s does not apply", o.Mode)
	}
	return cfg, true, nil
}

// runEmitKafka produces the events to the topic cfg names.
func runEmitKafka(ctx context.Context, opts *emitOptions, cfg kafka.Config) error {
	next, err := opts.source(ctx)
	if err != nil {
		return err
	}
	e := newEmitter(opts, nil)
	defer e.closeOutput()
	if opts.File == "" {
		e.prog.total = opts.total()
	}
	po := kafka.ProduceOptions{}
	if opts.node.flags != nil && opts.node.flags.Changed("timeout") {
		po.Timeout = opts.Timeout
	}
	if _, err := emit.RunKafka(ctx, emit.KafkaConfig{Topic: cfg, Produce: po, Events: next, Limiter: opts.limiter(), Acks: e.acks}); err != nil {
		return err
	}
	e.finish()
	return nil
}
