package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/time/rate"

	"github.com/evtctl/evtctl/internal/deliver"
	"github.com/evtctl/evtctl/internal/emit"
	"github.com/evtctl/evtctl/internal/english"
	"github.com/evtctl/evtctl/internal/eventgen"
	"github.com/evtctl/evtctl/internal/iostreams"
	"github.com/evtctl/evtctl/pkg/client"
	"github.com/evtctl/evtctl/pkg/wire"
)

// emit's defaults for --max-attempts and --timeout.
const (
	emitMaxAttempts = 10
	emitTimeout     = 30 * time.Second
)

type emitOptions struct {
	streams *iostreams.IOStreams
	node    nodeOptions

	To              string
	Type            string
	Source          string
	ID              string
	Subject         string
	Time            string
	Data            string
	DataContentType string
	Ext             []string
	Mode            string
	HeaderEncoding  headerEncodingOption
	BatchSize       int
	Headers         []string
	Count           int
	endless         bool // --count 0: send until interrupted
	Rate            float64
	File            string
	Spool           string
	Flush           string
	Output          string
	JQ              jqOption
	MaxAttempts     int
	Timeout         time.Duration
	Strict          bool
	Concurrency     int
	Signal          string
	SignalFormat    string

	now func() time.Time
}

func newCmdEmit(streams *iostreams.IOStreams) *cobra.Command {
	return newCmdEmitWith(streams, func(ctx context.Context, opts *emitOptions) error {
		_, err := runEmit(ctx, opts)
		return err
	})
}

// newCmdEmitWith is emit with run in place of runEmit, once the flags are parsed and checked.
func newCmdEmitWith(streams *iostreams.IOStreams, run func(context.Context, *emitOptions) error) *cobra.Command {
	opts := &emitOptions{streams: streams, now: time.Now}
	cmd := &cobra.Command{
		Use:   "emit",
		Short: "Send CloudEvents to a node or any CloudEvents HTTP receiver",
		Long: `Send test CloudEvents: one from flags, --count of them from templates (--count 0: until
interrupted), or JSON lines from --file (one CloudEvent in JSON format per line; - for stdin).

Defaults follow OEP-41: specversion 1.0, id a UUID1, time now in UTC, datacontenttype
application/json, and the extensions minorversion 0 and pii false.

Templates in --type, --source, --id, --subject, --data and --ext values see {{.Seq}} (1, 2, …)
and the helpers {{uuid}}, {{now}}, {{randInt 1 100}} and {{randChoice "a" "b"}}.

The lines of --file go to a node in batches (batch mode): as many events as fit in 1 MiB, at
most 4,096 (--batch-size N: N), in the file's order. When the input pauses (a slow producer
on stdin or another pipe), what was read goes within 50 ms. A line must hold one JSON object;
the node checks the rest.

Other events, and --file to another receiver (--to) or with --spool, go one per request in
structured mode, which keeps the types of extensions (minorversion an integer, pii a boolean);
binary mode carries every attribute as a string header, percent-encoded as the HTTP binding
requires. Receivers built on the CloudEvents Go SDK v2 and the conformance tool's listener do
not decode header values (they would read hello%20world): send them structured mode, or binary
mode with --header-encoding raw, which sends values as they are and refuses a value that
cannot go in a header unencoded (non-ASCII, a control character, a space at either end).

--to redis://HOST:PORT/DB/STREAM (rediss:// for TLS; a password in the address or in
--token) adds each event to a Redis stream as an entry, as the Open edX event bus writes one:
fields type, id, source, time, minorversion, sourcehost and sourcelib, the event's other
attributes, then event_data, its data as bytes; --batch-size of them (default 100) in one
transaction, or one at a time with --rate. evtctl tail and replay read such entries back as
the events.

Failed requests are retried with backoff (--max-attempts); with --spool DIR every event is
kept on disk until it is delivered, and --flush DIR sends what waits. How replies, retries,
order, repeats and the spool's dead letters work: evtctl help delivery.`,
		Example: `  evtctl emit --type org.example.shop.order.purchased.v1 \
      --source https://shop.example.com/orders --data '{"total": 12.5}'
  evtctl emit --count 1000 --rate 200 --source https://load.example.com/ \
      --type org.example.load.sample.generated.v1 --data '{"n": {{.Seq}}}'
  evtctl emit --file events.jsonl --mode batch --batch-size 500
  evtctl emit --to http://localhost:8080/webhook --mode structured \
      --type org.example.hook.test.sent.v1 --source https://ops.example.com/
  evtctl emit --spool ./outbox --count 100 --source https://shop.example.com/ \
      --type org.example.shop.order.purchased.v1
  evtctl emit --flush ./outbox`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.validate(cmd); err != nil {
				return err
			}
			return run(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	opts.node.addFlags(f)
	f.StringVar(&opts.To, "to", "", "send to this CloudEvents HTTP receiver instead of a node, or write to a Kafka topic (kafka://…/TOPIC) or a Redis stream (redis://…/STREAM)")
	f.StringVar(&opts.Type, "type", "", "event type, e.g. org.example.shop.order.purchased.v1")
	f.StringVar(&opts.Source, "source", "", "event source (URI-reference), e.g. /openedx/lms/web")
	f.StringVar(&opts.ID, "id", "", "event id (default: a new UUID1 per event)")
	f.StringVar(&opts.Subject, "subject", "", "event subject")
	f.StringVar(&opts.Time, "time", "", "event time, RFC 3339 (default: now, UTC)")
	f.StringVar(&opts.Data, "data", "", "event data: JSON text, @FILE, or - for stdin (not JSON: sent byte for byte, with --data-content-type)")
	f.StringVar(&opts.DataContentType, "data-content-type", "", "media type of --data (default application/json)")
	f.StringArrayVar(&opts.Ext, "ext", nil, "extension attribute KEY=VALUE (repeatable); true/false and integers are sent as such")
	enumVar(f, &opts.Mode, "mode", "", "HTTP content mode: {values}; by default batch for --file to a node, else structured", choice{name: "structured"},
		choice{name: "binary", help: "extensions as strings"}, choice{name: "batch", help: "many events per request"})
	opts.HeaderEncoding.addFlag(f)
	f.IntVar(&opts.BatchSize, "batch-size", 0, "events per request in batch mode (default: as many as fit in 1 MiB, at most 4096)")
	f.StringArrayVarP(&opts.Headers, "header", "H", nil, "extra HTTP header 'Name: value' (repeatable)")
	f.IntVar(&opts.Count, "count", 1, "send this many events made from the flags; 0: until interrupted")
	f.Float64Var(&opts.Rate, "rate", 0, "events per second, spread evenly (0: as fast as the receiver takes them)")
	f.StringVar(&opts.File, "file", "", "send the CloudEvents in this JSON-lines file (- for stdin)")
	f.StringVar(&opts.Spool, "spool", "", "write every event durably to this directory before sending any; remove each once delivered")
	f.StringVar(&opts.Flush, "flush", "", "send the events pending in this spool directory, then exit")
	f.StringVar(&opts.Signal, "signal", "", "send Evented API signals to this URL instead: --type DOMAIN.NAME, --data an object of attributes")
	enumVar(f, &opts.SignalFormat, "signal-format", "form", "how --signal sends: {values}",
		choice{name: "form", help: "POST"}, choice{name: "json", help: "POST"}, choice{name: "get", help: "query string"})
	f.IntVar(&opts.Concurrency, "concurrency", 1, "requests in flight at once; above 1, events may arrive out of order")
	f.BoolVar(&opts.Strict, "strict", false, "check each event as evtctl lint does and send nothing if any has an error")
	f.IntVar(&opts.MaxAttempts, "max-attempts", emitMaxAttempts, "attempts per request before giving up, the first included")
	f.DurationVar(&opts.Timeout, "timeout", emitTimeout, "time limit for one attempt")
	enumVarP(f, &opts.Output, "output", "o", "", "{values}: one line per accepted event; by default text on a terminal, json otherwise",
		choice{name: "text"}, choice{name: "json"})
	opts.JQ.addFlag(f)
	return cmd
}

func (o *emitOptions) validate(cmd *cobra.Command) error {
	if err := o.JQ.implyJSON(&o.Output, cmd.Flags().Changed("output"), "json"); err != nil {
		return err
	}
	if err := o.JQ.compile(cmd.Context()); err != nil {
		return err
	}
	if cmd.Flags().Changed("batch-size") && o.BatchSize < 1 {
		return usagef("--batch-size must be at least 1")
	}
	if o.Mode == "" {
		// A file goes to a node in batches, in order; one event per request to any other
		// receiver (which may not take batches), and from a spool (whose receiver refuses
		// events one by one).
		o.Mode = "structured"
		if o.File != "" && o.To == "" && o.Spool == "" && o.Signal == "" {
			o.Mode = "batch"
		}
	}
	if o.Concurrency < 1 {
		return usagef("--concurrency must be at least 1")
	}
	if o.MaxAttempts < 1 {
		return usagef("--max-attempts must be at least 1")
	}
	if o.Count < 0 || o.Rate < 0 {
		return usagef("--count and --rate must not be negative")
	}
	o.endless = cmd.Flags().Changed("count") && o.Count == 0
	if _, err := o.HeaderEncoding.get(o.Mode); err != nil {
		return err
	}
	if o.To != "" && cmd.Flags().Changed("node") {
		return usagef("--to and --node choose the target: give one")
	}
	if redisTarget(o.To) {
		if err := o.checkRedisFlags(cmd); err != nil {
			return err
		}
	}
	if o.Signal != "" {
		u, err := targetURL(o.Signal)
		if err != nil {
			return usagef("--signal: %v", err)
		}
		o.Signal = u
		for _, f := range []string{"to", "node", "mode", "header-encoding", "batch-size", "spool", "flush", "file", "concurrency"} {
			if cmd.Flags().Changed(f) {
				return usagef("--signal sends signals made from the flags; --%s does not apply", f)
			}
		}
		if o.Source == "" {
			o.Source = "/evtctl/signal" // a signal has no source; the events made first need one
		}
	}
	if o.Flush != "" {
		if o.File != "" || cmd.Flags().Changed("count") || o.Spool != "" {
			return usagef("--flush sends what a spool holds; it takes no --file, --count or --spool")
		}
		return nil
	}
	if o.File != "" {
		for _, f := range []string{"type", "source", "id", "subject", "time", "data", "data-content-type", "ext", "count"} {
			if cmd.Flags().Changed(f) {
				return usagef("--file sends the events in the file as they are; --%s does not apply", f)
			}
		}
		return nil
	}
	if o.Type == "" || o.Source == "" {
		return usagef("--type and --source are required (or give --file)")
	}
	if o.endless && o.Spool != "" {
		return usagef("--spool writes every event of the run before it sends any: it needs an end, not --count 0")
	}
	return nil
}

// total is how many events the flags make: --count, 1 by default; 0 for no end (--count 0).
func (o *emitOptions) total() int {
	if o.endless {
		return 0
	}
	return max(o.Count, 1)
}

// target resolves where events go and the sender options.
func (o *emitOptions) sender() (*deliver.Sender, error) {
	ns, err := o.node.settings()
	if err != nil {
		return nil, err
	}
	url, token, caFile, insecure := o.To, ns.IngestToken, ns.CAFile, ns.Insecure
	if url != "" {
		u, err := targetURL(url)
		if err != nil {
			return nil, usagef("--to: %v", err)
		}
		// Another target: the node's tokens and TLS settings are not for it.
		url, token, caFile, insecure = u, o.node.Token, o.node.CAFile, o.node.Insecure
	} else {
		base, err := client.NormalizeNode(ns.Node)
		if err != nil {
			return nil, usagef("--node: %v", err)
		}
		url = base + wire.PathEvents
	}
	hc, err := emit.HTTPClient(caFile, insecure)
	if err != nil {
		return nil, usagef("%v", err)
	}
	h, err := o.headers()
	if err != nil {
		return nil, err
	}
	mode, err := deliver.ParseMode(o.Mode)
	if err != nil {
		return nil, err
	}
	enc, err := o.HeaderEncoding.get(o.Mode)
	if err != nil {
		return nil, err
	}
	s, err := emit.NewSender(emit.Target{
		URL: url, Node: o.To == "", Client: hc, Token: token, Headers: h, Mode: mode, HeaderEncoding: enc,
		MaxAttempts: o.MaxAttempts, Timeout: o.Timeout, UserAgent: "evtctl/" + versionString(), OnRetry: o.reportRetry,
	})
	if err != nil {
		return nil, usagef("%v", err)
	}
	return s, nil
}

// headers parses the -H flags.
func (o *emitOptions) headers() (http.Header, error) {
	h := http.Header{}
	for _, kv := range o.Headers {
		k, v, ok := strings.Cut(kv, ":")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, usagef("-H %q: want 'Name: value'", kv)
		}
		h.Add(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	return h, nil
}

// reportRetry tells of a failed attempt that will be retried.
func (o *emitOptions) reportRetry(attempt int, delay time.Duration, err error) {
	fmt.Fprintf(o.streams.ErrOut, "evtctl: %s; retrying in %s (attempt %d)\n", safeText(err.Error()), delay.Round(100*time.Millisecond), attempt)
}

// targetURL checks a receiver's URL; a bare host:port[/path] means http, as for --node.
// Unlike a node's address, path, trailing slash and query are kept as given.
func targetURL(s string) (string, error) {
	given := strings.TrimSpace(s)
	s = given
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := neturl.Parse(s)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", fmt.Errorf("%q is not an http(s) URL or host:port/path", given)
	}
	return u.String(), nil
}

// source yields the events to send, one at a time, as validated CloudEvents JSON, each with
// its number: its line in --file, else its place in the sequence (1, 2, …). The error is
// io.EOF when there are no more.
type source func() (ev []byte, n int, err error)

func (o *emitOptions) source(ctx context.Context) (source, error) {
	if o.File != "" {
		var r io.Reader
		if o.File == "-" {
			r = stdinData(ctx, o.streams, "events")
		} else {
			f, err := os.Open(o.File)
			if err != nil {
				return nil, usagef("--file: %v", err)
			}
			r = f // closed at exit
		}
		return emit.FileEvents(r, o.fileEvent), nil
	}
	data, err := o.readData(ctx)
	if err != nil {
		return nil, err
	}
	exts := map[string]string{}
	for _, kv := range o.Ext {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usagef("--ext %q: want KEY=VALUE", kv)
		}
		exts[k] = v
	}
	count := o.total()
	t := emit.Template{
		Spec: eventgen.Spec{
			Type: o.Type, Source: o.Source, ID: o.ID, Subject: o.Subject, Time: o.Time,
			Data: data, DataContentType: o.DataContentType, Extensions: exts,
		},
		Count: count, Now: o.now,
	}
	if o.Strict {
		t.Check = func(n int, ev []byte) error { return o.lintEvent(ev, n) }
	}
	next, err := emit.TemplateEvents(t)
	if err != nil {
		return nil, usagef("%w", err)
	}
	if count != 1 && o.ID != "" && !strings.Contains(o.ID, "{{") {
		if count == 0 {
			return nil, usagef("--count 0 with a fixed --id would send one event again and again; use a template such as --id 'order-{{.Seq}}'")
		}
		return nil, usagef("--count %d with a fixed --id would send one event %d times; use a template such as --id 'order-{{.Seq}}'", count, count)
	}
	// Events made from the flags are checked as the node would check them: a value that
	// makes an invalid event is a usage error.
	return func() ([]byte, int, error) {
		ev, n, err := next()
		if ie := (*emit.InputError)(nil); errors.As(err, &ie) {
			err = usagef("%w", err)
		}
		return ev, n, err
	}, nil
}

func (o *emitOptions) readData(ctx context.Context) (string, error) {
	switch {
	case o.Data == "-":
		b, err := io.ReadAll(stdinData(ctx, o.streams, "the data"))
		if err != nil {
			return "", fmt.Errorf("--data -: %w", err)
		}
		return string(b), nil // byte for byte: JSON's whitespace is compacted, other data kept
	case strings.HasPrefix(o.Data, "@"):
		b, err := os.ReadFile(o.Data[1:])
		if err != nil {
			return "", usagef("--data: %v", err)
		}
		return string(b), nil
	}
	return o.Data, nil
}

// runSignals sends Evented API signals made from the flags.
func runSignals(ctx context.Context, opts *emitOptions) error {
	next, err := opts.source(ctx)
	if err != nil {
		return err
	}
	h, err := opts.headers()
	if err != nil {
		return err
	}
	policy := deliver.EventedAPIPolicy()
	policy.Backoff.MaxAttempts = opts.MaxAttempts
	c, err := deliver.NewClient(deliver.Config{
		URL: opts.Signal, Policy: &policy, Header: h, Timeout: opts.Timeout,
		UserAgent: "evtctl/" + versionString(), OnRetry: opts.reportRetry,
	})
	if err != nil {
		return usagef("--signal: %v", err)
	}
	prog := newProgress(opts.streams, "sent", "signal")
	defer prog.done()
	res, err := emit.RunSignals(ctx, emit.SignalConfig{
		Client: c, Format: opts.SignalFormat, Events: next, Rate: opts.Rate,
		Out: opts.JQ.writer(opts.streams.Out), JSON: opts.Output == "json" || (opts.Output == "" && !opts.streams.IsStdoutTTY()),
		Gone: closedPipe, Progress: prog.add,
	})
	if res.OutGone {
		// stdout's reader has gone: the signals still went (see emit.Acks)
		noteDiscarded(opts.streams, "signal")
	}
	if ie := (*emit.InputError)(nil); errors.As(err, &ie) {
		err = usagef("%w", err)
	}
	return err
}

// runEmit sends the events; it returns the emitter that did, which holds the counts, unless
// it sent signals.
func runEmit(ctx context.Context, opts *emitOptions) (*emitter, error) {
	if cfg, ok, err := opts.kafkaTarget(); ok || err != nil {
		if err != nil {
			return nil, err
		}
		return nil, runEmitKafka(ctx, opts, cfg)
	}
	if opts.Signal != "" {
		return nil, runSignals(ctx, opts)
	}
	if redisTarget(opts.To) {
		return runEmitRedis(ctx, opts)
	}
	s, err := opts.sender()
	if err != nil {
		return nil, err
	}
	e := newEmitter(opts, s)
	defer e.closeOutput()
	switch {
	case opts.Spool != "" || opts.Flush != "":
		return e, e.runSpooled(ctx)
	case opts.Mode == "batch":
		return e, e.runBatched(ctx)
	}
	return e, e.runDirect(ctx)
}

// emitter delivers the events of one run and reports each accepted one.
type emitter struct {
	opts  *emitOptions
	s     *deliver.Sender
	start time.Time
	prog  *progress // its counts are guarded by acks
	acks  *emit.Acks
}

func newEmitter(opts *emitOptions, s *deliver.Sender) *emitter {
	e := &emitter{opts: opts, s: s, start: time.Now()}
	// A running count on stderr only while stdout goes elsewhere: on a terminal it would
	// interleave with the lines for each event.
	e.prog = newProgress(opts.streams, "sent", "event")
	e.prog.on = e.prog.on && !opts.streams.IsStdoutTTY()
	e.acks = emit.NewAcks(opts.JQ.writer(opts.streams.Out), emit.AckOptions{
		JSON: opts.Output == "json" || (opts.Output == "" && !opts.streams.IsStdoutTTY()),
		Safe: safeText, Gone: closedPipe, Progress: e.prog.add,
	})
	return e
}

// report writes a line for each event the receiver accepted.
func (e *emitter) report(events [][]byte, res []deliver.Result) error {
	return e.acks.Report(events, res)
}

// closeOutput writes what is left of the lines, and says once if stdout's reader went away
// before they were all written.
func (e *emitter) closeOutput() {
	if e.acks.Close() {
		noteDiscarded(e.opts.streams, "event")
	}
}

// noteDiscarded says on stderr that stdout's reader went away while the lines of delivered
// events (or signals) were still being written.
func noteDiscarded(s *iostreams.IOStreams, what string) {
	fmt.Fprintf(s.ErrOut, "evtctl: standard output was closed: the lines of the %ss delivered after that were discarded\n", what)
}

// delivered returns how many events the receiver has accepted so far.
func (e *emitter) delivered() int {
	sent, _, _ := e.acks.Counts()
	return sent
}

// finish closes a successful run.
func (e *emitter) finish() {
	e.prog.done()
	sent, dups, _ := e.acks.Counts()
	e.opts.summary(e.prog, sent, dups, e.start)
}

// group returns how many events go in one request from a spool, and without batches.
func (o *emitOptions) group() int {
	if o.Mode == "batch" {
		if o.BatchSize > 0 {
			return o.BatchSize
		}
		return spoolChunk
	}
	return 1
}

// limiter paces the requests for --rate, or returns nil.
func (o *emitOptions) limiter() *rate.Limiter {
	if o.Rate <= 0 {
		return nil
	}
	return rate.NewLimiter(rate.Limit(o.Rate), o.group())
}

// batch is the events of one request, each with its number (see source).
type batch = emit.Group

// runDirect sends the events as they are read, without a spool: a failure that stops the
// run leaves the rest unsent, and the message says which event failed, why, and how many
// were delivered.
func (e *emitter) runDirect(ctx context.Context) error {
	opts := e.opts
	next, err := opts.source(ctx)
	if err != nil {
		return err
	}
	if opts.File == "" {
		e.prog.total = opts.total()
	}
	res, _ := emit.Run(ctx, emit.Config{Sender: e.s, Unbatched: true, Events: next, Rate: opts.Rate, Concurrency: opts.Concurrency, Acks: e.acks})
	return e.conclude(ctx, res.SendErr, res.ReadErr)
}

// conclude ends a run without a spool: it words a failed delivery, which left the rest
// unsent, or a bad event, before which the events were sent.
func (e *emitter) conclude(ctx context.Context, sendErr, readErr error) error {
	opts := e.opts
	switch {
	case sendErr != nil && closedPipe(sendErr):
		return nil
	case ctx.Err() != nil && (sendErr != nil || readErr != nil):
		// Interrupted (the end of a run of --count 0): what was sent is summed up.
		e.finish()
		return cmp.Or(sendErr, readErr, ctx.Err())
	case sendErr != nil:
		e.prog.done()
		hints, failure := splitHints(e.failure(sendErr))
		tally := e.notSent()
		if tally == "" {
			return withHints(failure, hints...)
		}
		fmt.Fprintf(opts.streams.ErrOut, "evtctl: %s\n", safeText(failure.Error()))
		return withHints(&statusError{exitError, errors.New(tally)}, hints...)
	case readErr != nil && !errors.Is(readErr, context.Canceled):
		e.prog.done()
		if n := e.delivered(); n > 0 {
			fmt.Fprintf(opts.streams.ErrOut, "evtctl: %s sent before the one that failed\n", english.WasWere(n, "event"))
		}
		return readErr
	case readErr != nil:
		return readErr
	}
	e.finish()
	return nil
}

// notSent says, after a failed delivery without a spool, what did not reach the receiver;
// nothing when the run had one event to send.
func (e *emitter) notSent() string {
	n := e.delivered()
	if e.opts.File == "" {
		total := e.opts.total()
		switch total {
		case 1:
			return ""
		case 0:
			return fmt.Sprintf("delivered %s before the run stopped", english.Plural(n, "event"))
		}
		return fmt.Sprintf("delivered %d of %s; %s not sent", n, english.Plural(total, "event"), english.WasWere(total-n, ""))
	}
	return fmt.Sprintf("delivered %s; the rest of --file %s was not sent", english.Plural(n, "event"), e.opts.File)
}

// failure words a failed delivery: a target that cannot be reached or does not take
// events, with what to do about it; a refused event, naming it and giving the receiver's
// reason; 410 Gone.
func (e *emitter) failure(err error) error {
	toNode := e.opts.To == ""
	if e.s == nil {
		return err // a Redis stream: its source words its failures
	}
	if ce := deliveryContact(err, toNode, e.opts.node.resolved, e.s.Where()); ce != nil {
		return ce
	}
	var (
		se *deliver.StatusError
		f  *emit.SendFailure
	)
	who := "the receiver"
	if toNode {
		who = "the node"
	}
	switch {
	case errors.Is(err, deliver.ErrGone):
		return fmt.Errorf("%s answered 410 Gone: it takes no more events; stopping", who)
	case errors.As(err, &se) && emit.Refusal(se.Status) && errors.As(err, &f):
		return withHints(fmt.Errorf("%s refused %s: %s", who, e.describeEvents(f.Group), statusReason(se)),
			authHint(err, toNode, e.opts.node.resolved)...)
	}
	return err
}

// statusReason is a refusal's status and the receiver's reason: `400 Bad Request: "source"
// is missing`, or that it gave none.
func statusReason(se *deliver.StatusError) string {
	s := strconv.Itoa(se.Status)
	if t := http.StatusText(se.Status); t != "" {
		s += " " + t
	}
	if strings.TrimSpace(se.Reason) == "" {
		return s + ", with no reason given"
	}
	return s + ": " + safeText(se.Reason)
}

// describeEvents names the events of a request for a message: their id, and their line of
// --file or their number.
func (e *emitter) describeEvents(b batch) string {
	where := func(nums []int) string {
		first, last := nums[0], nums[len(nums)-1]
		switch {
		case e.opts.File != "" && first == last:
			return fmt.Sprintf("--file line %d", first)
		case e.opts.File != "":
			return fmt.Sprintf("--file lines %d-%d", first, last)
		case e.opts.total() == 0 && first == last:
			return fmt.Sprintf("number %d", first)
		case e.opts.total() == 0:
			return fmt.Sprintf("numbers %d-%d", first, last)
		case first == last:
			return fmt.Sprintf("number %d of %d", first, e.opts.total())
		}
		return fmt.Sprintf("numbers %d-%d of %d", first, last, e.opts.total())
	}
	if len(b.Events) == 1 {
		return fmt.Sprintf("event %s (%s)", safeText(eventID(b.Events[0])), where(b.Nums))
	}
	return fmt.Sprintf("a batch of %s, %s to %s (%s)", english.Plural(len(b.Events), "event"),
		safeText(eventID(b.Events[0])), safeText(eventID(b.Events[len(b.Events)-1])), where(b.Nums))
}

// summary closes a run on a terminal, unless the progress line already did.
func (o *emitOptions) summary(prog *progress, sent, dups int, start time.Time) {
	if !o.streams.IsStderrTTY() || !prog.shown.IsZero() {
		return
	}
	el := time.Since(start)
	fmt.Fprintf(o.streams.ErrOut, "sent %s in %s (%.0f/s)", english.Plural(sent, "event"), el.Round(time.Millisecond), float64(sent)/max(el.Seconds(), 1e-9))
	if dups > 0 {
		if dups == 1 {
			fmt.Fprint(o.streams.ErrOut, "; 1 was a duplicate the node already had")
		} else {
			fmt.Fprintf(o.streams.ErrOut, "; %d were duplicates the node already had", dups)
		}
	}
	fmt.Fprintln(o.streams.ErrOut)
}

func eventID(b []byte) string { return emit.EventID(b) }

// deliveryError words a failure that stopped a spool's drain: the request, not one event,
// was refused (a refused event is dead-lettered), or the target cannot be reached.
func (e *emitter) deliveryError(err error) error {
	toNode := e.opts.To == ""
	if ce := deliveryContact(err, toNode, e.opts.node.resolved, e.s.Where()); ce != nil {
		return ce
	}
	who := "the receiver"
	if toNode {
		who = "the node"
	}
	var se *deliver.StatusError
	switch {
	case errors.Is(err, deliver.ErrGone):
		return fmt.Errorf("%s answered 410 Gone: it takes no more events; stopping", who)
	case errors.As(err, &se) && emit.Refusal(se.Status):
		return withHints(fmt.Errorf("%s refused the request: %s", who, statusReason(se)), authHint(err, toNode, e.opts.node.resolved)...)
	}
	return err
}
