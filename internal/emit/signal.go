package emit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/tidwall/gjson"
	"golang.org/x/time/rate"

	"github.com/evtctl/evtctl/internal/deliver"
)

// signalSender sends Evented API signals through deliver's Client with the Evented API's
// policy (deliver.EventedAPIPolicy): 2xx is success; only 500, 503 and 504 are retried,
// honouring Retry-After; 410 Gone means stop for good; redirects are followed as
// deliver.Policy says; any other reply is a failure with the consumer's reason.
type signalSender struct {
	format string // form, json or get
	c      *deliver.Client
}

// signalOf maps a CloudEvent made by emit to signal attributes: _domain and _name from the
// type (split at its last dot), _timestamp from time, and data's members.
func signalOf(event []byte) (url.Values, []byte, error) {
	typ := gjson.GetBytes(event, "type").String()
	i := strings.LastIndexByte(typ, '.')
	if i <= 0 || i == len(typ)-1 {
		return nil, nil, &InputError{fmt.Errorf("--signal needs --type DOMAIN.NAME (the signal's _domain and _name), got %q", typ)}
	}
	v := url.Values{}
	v.Set("_domain", typ[:i])
	v.Set("_name", typ[i+1:])
	obj := map[string]any{"_domain": typ[:i], "_name": typ[i+1:]}
	if t := gjson.GetBytes(event, "time"); t.Exists() {
		v.Set("_timestamp", t.String())
		obj["_timestamp"] = t.String()
	}
	data := gjson.GetBytes(event, "data")
	if data.Exists() && !data.IsObject() {
		return nil, nil, &InputError{errors.New("--signal sends --data as attributes: it must be a JSON object")}
	}
	data.ForEach(func(k, val gjson.Result) bool {
		v.Add(k.String(), val.String())
		obj[k.String()] = val.Value()
		return true
	})
	js, err := json.Marshal(obj)
	return v, js, err
}

func (s *signalSender) send(ctx context.Context, event []byte) (int, error) {
	form, js, err := signalOf(event)
	if err != nil {
		return 0, err
	}
	var req deliver.Request
	switch s.format {
	case "get":
		req = deliver.Request{Method: http.MethodGet, Query: form.Encode()}
	case "json":
		req = deliver.Request{Header: http.Header{"Content-Type": {"application/json"}}, Body: js}
	default:
		req = deliver.Request{Header: http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, Body: []byte(form.Encode())}
	}
	a, err := s.c.Do(ctx, req)
	var se *deliver.StatusError
	switch {
	case err == nil:
		return a.Status, nil
	case ctx.Err() != nil:
		return 0, err
	case errors.Is(err, deliver.ErrGone):
		return 0, fmt.Errorf("the consumer answered 410 Gone: it takes no more signals; stopping")
	case errors.As(err, &se) && a.Verdict == deliver.Failed && se.Status >= 500:
		return 0, fmt.Errorf("the consumer answered %d: %s (the Evented API retries only 500, 503 and 504)", se.Status, a.Reason)
	case errors.As(err, &se) && a.Verdict == deliver.Failed:
		return 0, fmt.Errorf("the consumer refused the signal (%d): %s", se.Status, a.Reason)
	case a.Verdict == deliver.Failed: // a redirect it would not follow
		return 0, err
	case a.Status == 0:
		return 0, fmt.Errorf("cannot reach the consumer: %w", err)
	}
	return 0, fmt.Errorf("the consumer answered %d: %w", a.Status, err)
}

// SignalConfig is a run that sends Evented API signals made from events (see signalOf).
type SignalConfig struct {
	Client *deliver.Client // made with deliver.EventedAPIPolicy
	Format string          // form, json or get
	// Events yields the events, each with its number; its error is io.EOF when there are
	// no more.
	Events func() (ev []byte, n int, err error)
	Rate   float64 // signals per second; 0: as fast as the consumer takes them
	// Out takes a line for each signal the consumer accepted, in JSON or as text.
	Out  io.Writer
	JSON bool
	// Gone reports a write error that means Out's reader has gone: the signals still go,
	// and the result says so. Nil: none does.
	Gone func(error) bool
	// Progress, when set, is told of each signal accepted.
	Progress func(n int)
}

// SignalResult is what a run of signals did.
type SignalResult struct {
	Sent    int
	OutGone bool // Out's reader went away: the lines of the signals after that were dropped
}

// RunSignals sends the signals of cfg, one at a time.
func RunSignals(ctx context.Context, cfg SignalConfig) (SignalResult, error) {
	var res SignalResult
	ss := &signalSender{format: cfg.Format, c: cfg.Client}
	var lim *rate.Limiter
	if cfg.Rate > 0 {
		lim = rate.NewLimiter(rate.Limit(cfg.Rate), 1)
	}
	for {
		ev, _, err := cfg.Events()
		if err == io.EOF {
			return res, nil
		}
		if err != nil {
			return res, err
		}
		if lim != nil {
			if err := lim.Wait(ctx); err != nil {
				return res, err
			}
		}
		status, err := ss.send(ctx, ev)
		if err != nil {
			return res, err
		}
		res.Sent++
		if cfg.Progress != nil {
			cfg.Progress(1)
		}
		if res.OutGone {
			continue
		}
		typ := gjson.GetBytes(ev, "type").String()
		if cfg.JSON {
			b, _ := json.Marshal(struct {
				Signal string `json:"signal"`
				Status int    `json:"status"`
			}{typ, status})
			_, err = cfg.Out.Write(append(b, '\n'))
		} else {
			_, err = fmt.Fprintf(cfg.Out, "signalled %s (%d)\n", typ, status)
		}
		if err != nil && (cfg.Gone == nil || !cfg.Gone(err)) {
			return res, err
		}
		res.OutGone = err != nil
	}
}
