package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/tidwall/gjson"

	"github.com/evtctl/evtctl/internal/deliver"
	"github.com/evtctl/evtctl/internal/english"
	"github.com/evtctl/evtctl/internal/forward"
	"github.com/evtctl/evtctl/internal/iostreams"
	"github.com/evtctl/evtctl/internal/peer"
	"github.com/evtctl/evtctl/pkg/client"
	"github.com/evtctl/evtctl/pkg/cursor"
)

type forwardOptions struct {
	streams *iostreams.IOStreams
	node    nodeOptions
	query   queryOptions
	start   startOptions
	group   groupOption

	To             string
	State          string
	DeadLetter     string
	Mode           string
	HeaderEncoding headerEncodingOption
	Concurrency    int
	Ordered        bool
	Timeout        time.Duration
	RetryDelays    string
	MaxAttempts    int
	MaxPending     int
	Secret         string
	Headers        []string
	Output         string
	JQ             jqOption
	Sync           string
	UntilCaughtUp  bool
	FailOnDead     bool
	OnGap          string
	PageSize       int
	Wait           time.Duration
	RetryFor       time.Duration
}

func newCmdForward(streams *iostreams.IOStreams) *cobra.Command {
	opts := &forwardOptions{streams: streams}
	cmd := &cobra.Command{
		Use:   "forward --to URL",
		Short: "Deliver a node's events to a webhook with retries and a checkpoint",
		Long: `Follow a node's log and POST each matching event to a webhook as a CloudEvent (binary
mode by default), one request per event.

2xx delivers an event. A failed delivery is retried in tiers (--retry-delays), kept in a
durable store meanwhile, without holding up new events; an event given up on goes to a
dead-letter file. With --checkpoint FILE (or --state DIR) forward resumes where it stopped;
after a crash the events in flight are sent again, each with its id, so that the receiver can
drop repeats. How replies, retries, order, dead letters and the checkpoint work: evtctl help
delivery.

Binary mode percent-encodes ce- header values as the HTTP binding requires. Receivers built
on the CloudEvents Go SDK v2 and the conformance tool's listener do not decode them (they
would read hello%20world): use --mode structured, or --header-encoding raw, which sends values
as they are and dead-letters an event with a value that cannot go in a header unencoded
(non-ASCII, a control character, a space at either end).`,
		Example: `  evtctl forward --to http://localhost:8080/hook --checkpoint hook.json
  evtctl forward --to https://example.com/events --type 'org.openedx.#' \
      --from start --checkpoint hook.json --concurrency 16 \
      --secret "$WEBHOOK_SECRET"
  evtctl forward --to localhost:8080/hook --retry-delays 1s,10s,1m \
      --max-attempts 6 -o jsonl | jq -c 'select(.result != "delivered")'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.validate(cmd); err != nil {
				return err
			}
			return runForward(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	opts.node.addFlags(f)
	opts.query.addFlags(f)
	f.StringVar(&opts.To, "to", "", "the webhook to deliver to: an http(s) URL or host:port/path (required)")
	opts.start.addFlags(f, "forward")
	opts.group.addFlag(f)
	f.StringVar(&opts.State, "state", "", "directory of the retry store and the 410 record (default FILE.state beside --checkpoint)")
	f.StringVar(&opts.DeadLetter, "dead-letter", "", "append events given up on to FILE as JSON lines (default DIR/dead-letter.jsonl)")
	enumVar(f, &opts.Mode, "mode", "binary", "CloudEvents HTTP content mode: {values}", choice{name: "binary"}, choice{name: "structured"})
	opts.HeaderEncoding.addFlag(f)
	f.IntVar(&opts.Concurrency, "concurrency", 1, "deliveries in flight at once; above 1, events may arrive out of order")
	f.BoolVar(&opts.Ordered, "ordered", false, "deliver strictly in log order, one at a time, waiting for a failing event's retries")
	f.DurationVar(&opts.Timeout, "timeout", forward.DefaultTimeout, "time limit for one attempt, the reply included")
	f.StringVar(&opts.RetryDelays, "retry-delays", forward.FormatDelays(forward.DefaultDelays), "the retry tiers: how long an event waits after its 1st, 2nd, ... failure")
	f.IntVar(&opts.MaxAttempts, "max-attempts", 0, "attempts per event before it is dead-lettered, the first included (default: one per tier, plus the first)")
	f.IntVar(&opts.MaxPending, "max-pending", forward.DefaultMaxPending, "events waiting for a retry before reading new ones pauses")
	f.StringVar(&opts.Secret, "secret", "", "sign deliveries (Standard Webhooks: whsec_ and base64) (default $EVTCTL_WEBHOOK_SECRET)")
	f.StringArrayVarP(&opts.Headers, "header", "H", nil, "extra HTTP header 'Name: value' (repeatable)")
	opts.JQ.addFlag(f)
	enumVarP(f, &opts.Output, "output", "o", "", "{values}: write each attempt's result to stdout as a JSON line",
		choice{name: "jsonl"}, choice{name: "json", help: "the same as jsonl", alias: "jsonl"})
	enumVar(f, &opts.Sync, "sync", "always", "when to fsync the retry journal: {values}", choice{name: "always", help: "for every outcome"},
		choice{name: "checkpoint", help: "before each checkpoint: faster; a power loss may repeat recent deliveries"})
	f.BoolVar(&opts.UntilCaughtUp, "until-caught-up", false, "exit 0 once every event up to the head is delivered or dead-lettered (retries included)")
	f.BoolVar(&opts.FailOnDead, "fail-on-dead-letter", false, "with --until-caught-up: exit 1 when any event of the run was dead-lettered")
	enumVar(f, &opts.OnGap, "on-gap", "warn", "when events were lost to the node's retention: {values}", onGapChoices...)
	f.IntVar(&opts.PageSize, "page-size", 100, "events per request to the node")
	f.DurationVar(&opts.Wait, "wait", 25*time.Second, "long-poll wait per request to the node")
	f.DurationVar(&opts.RetryFor, "retry-for", 0, "give up when the node has failed for this long (0: keep retrying)")
	return cmd
}

func (o *forwardOptions) validate(cmd *cobra.Command) error {
	if err := o.JQ.implyJSON(&o.Output, cmd.Flags().Changed("output"), "jsonl"); err != nil {
		return err
	}
	if err := o.JQ.compile(cmd.Context()); err != nil {
		return err
	}
	if o.To == "" {
		return usagef("--to is required: the webhook to deliver to")
	}
	if _, err := o.HeaderEncoding.get(o.Mode); err != nil {
		return err
	}
	if o.Concurrency < 1 {
		return usagef("--concurrency must be at least 1")
	}
	if o.Ordered && cmd.Flags().Changed("concurrency") && o.Concurrency > 1 {
		return usagef("--ordered delivers one event at a time; it does not go with --concurrency %d", o.Concurrency)
	}
	if o.MaxAttempts < 0 || o.MaxPending < 1 || o.PageSize < 1 {
		return usagef("--max-attempts must not be negative, --max-pending and --page-size must be at least 1")
	}
	if o.Timeout <= 0 {
		return usagef("--timeout must be positive")
	}
	if o.FailOnDead && !o.UntilCaughtUp {
		return usagef("--fail-on-dead-letter goes with --until-caught-up: it decides the status of a run that ends")
	}
	return nil
}

// forwardPaths are where forward keeps what it must not lose.
type forwardPaths struct {
	checkpoint, state, deadLetter string
}

func (o *forwardOptions) paths() forwardPaths {
	p := forwardPaths{checkpoint: o.start.Checkpoint, state: o.State, deadLetter: o.DeadLetter}
	if p.state == "" && p.checkpoint != "" {
		p.state = p.checkpoint + ".state"
	}
	if p.checkpoint == "" && p.state != "" {
		p.checkpoint = filepath.Join(p.state, "checkpoint")
	}
	if p.deadLetter == "" && p.state != "" {
		p.deadLetter = filepath.Join(p.state, "dead-letter.jsonl")
	}
	return p
}

// target builds the receiver's side of the options.
func (o *forwardOptions) target() (forward.Target, error) {
	u, err := targetURL(o.To)
	if err != nil {
		return forward.Target{}, usagef("--to: %v", err)
	}
	t := forward.Target{URL: u, Mode: deliver.Binary, Timeout: o.Timeout, UserAgent: "evtctl/" + versionString()}
	if o.Mode == "structured" {
		t.Mode = deliver.Structured
	}
	if t.HeaderEncoding, err = o.HeaderEncoding.get(o.Mode); err != nil {
		return forward.Target{}, err
	}
	if len(o.Headers) > 0 {
		t.Header = http.Header{}
		for _, kv := range o.Headers {
			k, v, err := forward.ParseHeader(kv)
			if err != nil {
				return forward.Target{}, usagef("-H %v", err)
			}
			t.Header.Add(k, v)
		}
	}
	if secret := firstNonEmpty(o.Secret, os.Getenv("EVTCTL_WEBHOOK_SECRET")); secret != "" {
		key, err := forward.ParseSecret(secret)
		if err != nil {
			return forward.Target{}, usagef("--secret: %v", err)
		}
		t.Secret = key
	}
	return t, nil
}

func runForward(ctx context.Context, opts *forwardOptions) error {
	query, err := opts.query.build()
	if err != nil {
		return err
	}
	// Where --from says to begin, checked before anything is opened.
	start, _, c, err := opts.start.resolve(ctx, &opts.node, opts.streams, opts.backoff())
	if err != nil {
		return opts.node.explain(err)
	}
	target, err := opts.target()
	if err != nil {
		return err
	}
	if err := opts.group.open(c, opts.streams); err != nil {
		return err
	}
	delays, err := forward.ParseDelays(opts.RetryDelays)
	if err != nil {
		return usagef("--retry-delays: %v", err)
	}
	paths := opts.paths()
	errOut := opts.streams.ErrOut

	var st *forward.State
	if paths.state != "" {
		if st, err = forward.OpenState(paths.state); err != nil {
			return err
		}
		defer st.Close()
		if g, err := st.Gone(); err != nil {
			return err
		} else if g != nil {
			return &forward.GoneError{Record: *g, Path: st.GonePath()}
		}
		if n := st.Repaired(); n > 0 {
			fmt.Fprintf(errOut, "evtctl: warning: the retry journal in %s ended in a write cut short by a crash; %d bytes of it were dropped\n", paths.state, n)
		}
	} else {
		fmt.Fprintln(errOut, "evtctl: warning: without --checkpoint or --state nothing is kept: a restart begins at the head again, and events waiting for a retry are dropped")
	}

	so := client.StreamOptions{
		Query: query, PageSize: opts.PageSize, Wait: opts.Wait, OnRetry: retryReporter(opts.streams),
		Backoff: opts.backoff(),
	}
	if opts.UntilCaughtUp {
		so.Wait = time.Millisecond // the head is the goal: do not wait there for new events
	}
	from := "the head"
	cp, haveCP := cursor.Checkpoint{}, false
	if paths.checkpoint != "" {
		if cp, haveCP, err = loadCheckpoint(ctx, c, paths.checkpoint, so.Backoff, so.OnRetry); err != nil {
			return opts.node.explain(err)
		}
	}
	log := newLogNamer(ctx, c, cp.Log)
	saveCheckpoint := func(cur string) error {
		if paths.checkpoint != "" {
			if err := cursor.SaveCheckpoint(paths.checkpoint, cursor.Checkpoint{Cursor: cur, Node: c.Node(), Query: query, Log: log.at(cur), Updated: time.Now().UTC()}); err != nil {
				return err
			}
		}
		return opts.group.update(ctx, cur)
	}
	switch {
	case haveCP:
		resumeAt(&so, cp)
		from = "checkpoint " + describeCheckpoint(cp)
		nodeMoved(opts.streams, paths.checkpoint, cp, c.Node())
		if opts.start.From != "" {
			fmt.Fprintf(errOut, "evtctl: resuming from checkpoint %s; --from applies only when there is none\n", paths.checkpoint)
		}
	case opts.start.From != "":
		start.startStream(&so)
		from = opts.start.From
	case st != nil && !st.Fresh():
		// An earlier run used this state but saved no checkpoint (it died before it could):
		// going back to the oldest event repeats rather than loses.
		so.FromStart, from = true, "the oldest event (no checkpoint yet)"
	default:
		if err := fixHead(ctx, c, &so); err != nil {
			return opts.node.explain(err)
		}
	}
	if paths.checkpoint != "" && !haveCP {
		// Recorded now, so that a run stopped before its first event loses nothing.
		if err := cursor.SaveCheckpoint(paths.checkpoint, startCheckpoint(so, c.Node(), query, log)); err != nil {
			return err
		}
	}

	fo := forward.Options{
		Target: target, Order: c.Compare, Delays: delays, MaxAttempts: opts.MaxAttempts, Concurrency: opts.Concurrency,
		Ordered: opts.Ordered, MaxPending: opts.MaxPending, State: st, DeadLetter: paths.deadLetter,
	}
	if opts.Sync == "checkpoint" {
		fo.Sync = forward.SyncCheckpoint
	}
	if paths.checkpoint != "" || opts.group.Name != "" {
		fo.Checkpoint = saveCheckpoint
	}
	rep := newForwardReporter(opts)
	fo.OnResult = rep.result
	fw, err := forward.New(fo)
	if err != nil {
		return usagef("%v", err)
	}
	if opts.streams.IsStderrTTY() {
		fmt.Fprintf(errOut, "forwarding %s to %s from %s; Ctrl-C to stop\n", c.Node(), fw.Target(), from)
	}

	// The reader follows the log and hands events over; the forwarder delivers them. The
	// reader's failure (a gap with --on-gap fail, a node that is gone for good) stops the
	// forwarder, which then leaves its state consistent.
	fctx, stopForwarder := context.WithCancelCause(ctx)
	defer stopForwarder(nil)
	rctx, stopReader := context.WithCancel(ctx)
	events := make(chan forward.Event, opts.PageSize)
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		defer close(events)
		node := c.Node()
		err := c.Stream(rctx, so, func(b client.Batch) error {
			if err := onGap(opts.streams, opts.OnGap, b.Gap); err != nil {
				return err
			}
			for _, it := range b.Items {
				select {
				case events <- forward.Event{Cursor: it.Cursor, Pos: it.Pos, Data: asCloudEvent(node, it)}:
				case <-rctx.Done():
					return rctx.Err()
				}
			}
			if b.Cursor != "" && (len(b.Items) == 0 || client.PosOf(b.Items[len(b.Items)-1]) != b.Cursor) {
				select {
				case events <- forward.Event{Cursor: b.Cursor}: // nothing to deliver up to here
				case <-rctx.Done():
					return rctx.Err()
				}
			}
			if opts.UntilCaughtUp && b.CaughtUp {
				return errStop
			}
			return nil
		})
		// Stream returns only with a reason to stop (never nil).
		if !errors.Is(err, errStop) && rctx.Err() == nil {
			stopForwarder(err)
		}
	}()
	err = fw.Run(fctx, events)
	stopReader()
	<-readerDone
	if cause := context.Cause(fctx); cause != nil && ctx.Err() == nil && (err == nil || errors.Is(err, context.Canceled)) {
		// The reader stopped the forwarder, and closed its events as it went: the forwarder
		// may have seen them end first. The reader's reason is the result.
		err = cause
	}
	err = opts.group.finish(ctx, err)
	rep.summary(st, paths.deadLetter)
	var (
		ge *forward.GoneError
		ue *forward.UnreachableError
	)
	switch {
	case err == nil && opts.FailOnDead && rep.counts[forward.OutcomeDeadLetter] > 0:
		return &statusError{exitError, errors.New("")} // the summary said what and where
	case err == nil, closedPipe(err):
		return nil
	case errors.As(err, &ge):
		return err
	case errors.As(err, &ue):
		return unreachableReceiver(ue, opts.node.resolved)
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return opts.node.explain(opts.query.refused(err))
}

func (o *forwardOptions) backoff() client.Backoff { return client.Backoff{GiveUp: o.RetryFor} }

// asCloudEvent returns an item's event as a CloudEvent in JSON format. An evtctl node's items
// are CloudEvents already; a Tendermint node's are wrapped in one: its cursor as id, the
// node as source, the item's event as type, its time (a chain's block time) as time when
// the source stamped it with one, and its data as data.
func asCloudEvent(node string, it client.Item) []byte {
	if gjson.GetBytes(it.Data, "specversion").Exists() {
		return it.Data
	}
	data := it.Data
	if !json.Valid(data) {
		data, _ = json.Marshal(string(data))
	}
	ev := struct {
		SpecVersion     string          `json:"specversion"`
		ID              string          `json:"id"`
		Source          string          `json:"source"`
		Type            string          `json:"type"`
		Time            string          `json:"time,omitempty"`
		DataContentType string          `json:"datacontenttype"`
		Data            json.RawMessage `json:"data"`
	}{"1.0", it.Cursor, node, firstNonEmpty(it.Event, "tendermint.event"), "", "application/json", data}
	if !it.Time.IsZero() {
		ev.Time = it.Time.UTC().Format(time.RFC3339Nano)
	}
	b, _ := json.Marshal(ev)
	return b
}

// forwardReporter writes each attempt's result: JSON lines on stdout with -o jsonl, a line on
// stderr when it is a terminal, and (when it is not) dead letters and a 410 as warnings.
type forwardReporter struct {
	s      *iostreams.IOStreams
	out    *bufio.Writer // nil without -o jsonl
	tty    bool
	counts map[forward.Outcome]int
}

func newForwardReporter(opts *forwardOptions) *forwardReporter {
	r := &forwardReporter{s: opts.streams, tty: opts.streams.IsStderrTTY(), counts: map[forward.Outcome]int{}}
	if opts.Output == "jsonl" {
		r.out = bufio.NewWriter(opts.JQ.writer(opts.streams.Out))
	}
	return r
}

// forwardLine is one line of forward -o jsonl.
type forwardLine struct {
	Result      string  `json:"result"`
	Cursor      string  `json:"cursor"`
	ID          string  `json:"id"`
	Source      string  `json:"source,omitempty"`
	Type        string  `json:"type,omitempty"`
	Status      int     `json:"status"`
	Attempt     int     `json:"attempt"`
	LatencyMS   float64 `json:"latency_ms"`
	Tier        int     `json:"tier,omitempty"`
	NextAttempt string  `json:"next_attempt,omitempty"`
	RetryInMS   int64   `json:"retry_in_ms,omitempty"`
	Reason      string  `json:"reason,omitempty"`
	Redirects   int     `json:"redirects,omitempty"`
}

func (r *forwardReporter) result(res forward.Result) error {
	r.counts[res.Outcome]++
	if r.out != nil {
		l := forwardLine{Result: string(res.Outcome), Cursor: res.Cursor, ID: res.ID, Source: res.Source, Type: res.Type,
			Status: res.Status, Attempt: res.Attempt, LatencyMS: float64(res.Latency.Microseconds()) / 1000,
			Tier: res.Tier, Reason: res.Reason, Redirects: res.Redirects}
		if !res.NextAttempt.IsZero() {
			l.NextAttempt = res.NextAttempt.UTC().Format(time.RFC3339Nano)
			l.RetryInMS = res.RetryIn.Milliseconds()
		}
		b, _ := json.Marshal(l)
		r.out.Write(append(b, '\n'))
		if err := r.out.Flush(); err != nil {
			return err
		}
	}
	status := "---"
	if res.Status > 0 {
		status = fmt.Sprint(res.Status)
	}
	switch {
	case r.tty:
		line := fmt.Sprintf("%-11s %s %7s  attempt %d  %s", res.Outcome, status, latency(res.Latency), res.Attempt, res.ID)
		if res.Reason != "" {
			line += ": " + res.Reason
		}
		if res.Outcome == forward.OutcomeRetry {
			line += fmt.Sprintf("; next attempt in %s (tier %d)", res.RetryIn, res.Tier)
		}
		fmt.Fprintln(r.s.ErrOut, safeText(line))
	case res.Outcome == forward.OutcomeDeadLetter:
		fmt.Fprintf(r.s.ErrOut, "evtctl: gave up on event %s (cursor %s) after %s (status %s): %s\n",
			safeText(res.ID), res.Cursor, english.Plural(res.Attempt, "attempt"), status, safeText(res.Reason))
	}
	return nil
}

// latency shows a duration to two or three significant digits: 0.42ms, 12ms, 1.5s.
func latency(d time.Duration) string {
	switch {
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d.Microseconds())/1000)
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	}
	return d.Round(100 * time.Millisecond).String()
}

// unreachableReceiver words a receiver that has never answered and cannot be reached, with
// what to do about it, as emit does for --to.
func unreachableReceiver(ue *forward.UnreachableError, s nodeSettings) error {
	switch peer.Classify(ue.Err) {
	case peer.Certificate, peer.TLSFailure:
		// forward trusts the system's authorities for the receiver (--ca-file is the node's).
		return fmt.Errorf("TLS with the receiver %s failed: %v", ue.Target, unwrapTransport(ue.Err))
	}
	if ce := deliveryContact(ue.Err, false, s, ue.Target); ce != nil {
		return ce
	}
	return ue
}

// summary closes a run: on a terminal, what became of the events; otherwise, when any event
// was dead-lettered, how many and where they are kept (deadLetter: the file, "" for none).
func (r *forwardReporter) summary(st *forward.State, deadLetter string) {
	dead := r.counts[forward.OutcomeDeadLetter]
	where := "kept in " + deadLetter
	if deadLetter == "" {
		where = "not kept (no --checkpoint, --state or --dead-letter)"
	}
	if !r.tty {
		if dead > 0 {
			fmt.Fprintf(r.s.ErrOut, "evtctl: dead-lettered %s, %s\n", english.Plural(dead, "event"), where)
		}
		return
	}
	msg := fmt.Sprintf("delivered %d, dead-lettered %d", r.counts[forward.OutcomeDelivered], dead)
	if dead > 0 {
		msg += " (" + where + ")"
	}
	if st != nil && st.Pending() > 0 {
		msg += fmt.Sprintf("; %d waiting for a retry in %s", st.Pending(), st.Dir())
	}
	fmt.Fprintln(r.s.ErrOut, msg)
}
