package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/evtctl/evtctl/pkg/client"
	"github.com/evtctl/evtctl/pkg/cursor"
	"github.com/evtctl/evtctl/pkg/wire"
)

// NodeInfo is what Inspect learnt about a node.
type NodeInfo struct {
	Kind    string // KindEvtctl, KindTendermint, the kind a source names (a chain's: "cometbft"), or KindUnknown
	Version string // an evtctl node's version, from /healthz; the node's version as its source reads it
	Newest  string // the newest position at the time ("" for an empty log)
	How     string // how evtctl reads a node that is not read through the events method, for a note
	Err     error  // why the node could not be read, when Kind is KindUnknown
}

// Events reports whether the node serves the events method, which some benches need: an
// evtctl or a Tendermint node (or one whose kind is unknown).
func (i NodeInfo) Events() bool {
	return i.Kind == KindEvtctl || i.Kind == KindTendermint || i.Kind == KindUnknown
}

// A nodeDescriber is a source, other than the events method's, that says what its node is,
// for a report: its kind and version, and how evtctl reads it (a sentence).
type nodeDescriber interface {
	BenchNode(ctx context.Context) (kind, version, how string, err error)
}

// Inspect finds out what the node is the way the client does, through its page interface:
// the log's bounds, asked for as the client asks for them (on a node of the events method, a
// request for ascending order, which only an evtctl node honours; a node without that method
// is taken over by the source that knows it, a CometBFT node's). An evtctl node also answers
// /healthz with its version.
func Inspect(ctx context.Context, t Target) NodeInfo {
	info := NodeInfo{Kind: KindUnknown}
	hc := &http.Client{Timeout: 10 * time.Second}
	if tr, err := newTransport(t, 1); err == nil {
		hc.Transport = tr
		defer tr.CloseIdleConnections()
	}
	healthz := false
	if body, status, err := get(ctx, hc, t.URL+wire.PathHealth, t.Token); err == nil && status == http.StatusOK {
		if gjson.ValidBytes(body) && gjson.GetBytes(body, "status").String() == "ok" {
			healthz = true
			info.Version = gjson.GetBytes(body, "version").String()
		}
	}
	c, err := client.New(client.Options{Node: t.URL, Token: t.Token, CAFile: t.CAFile, Insecure: t.Insecure, HTTPClient: hc})
	if err != nil {
		info.Err = err
		return info
	}
	_, newest, err := c.Bounds(ctx)
	if err != nil {
		info.Err = err
		if healthz {
			info.Kind = KindEvtctl
		}
		return info
	}
	info.Newest = newest
	switch c.Kind() {
	case client.KindOther:
		d, ok := c.Source().(nodeDescriber)
		if !ok {
			info.Kind, info.Err = KindUnknown, fmt.Errorf("%s is read through a source that does not say what it is", t.URL)
			return info
		}
		if info.Kind, info.Version, info.How, err = d.BenchNode(ctx); err != nil {
			info.Kind, info.Err = KindUnknown, err
		}
	case client.KindEvtctl:
		info.Kind = KindEvtctl
	default:
		// A node that ignores the ascending extension: ADR-075 without evtctl's additions.
		info.Kind = KindTendermint
		if healthz || cursor.WidthOf(newest) == cursor.NodeWidth {
			info.Kind = KindEvtctl
		}
	}
	return info
}

func get(ctx context.Context, hc *http.Client, url, token string) ([]byte, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, 0, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Accept", "text/plain")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	return b, resp.StatusCode, err
}

// metrics is one scrape of a node's Prometheus text: series (name with its labels as
// written) to value.
type metrics map[string]float64

// scrapeMetrics reads the target's /metrics.
func scrapeMetrics(ctx context.Context, hc *http.Client, t Target) (metrics, error) {
	body, status, err := get(ctx, hc, t.metricsURL(), t.Token)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", t.metricsURL(), err)
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("%s answered %d", t.metricsURL(), status)
	}
	return parseMetrics(string(body)), nil
}

// parseMetrics reads Prometheus text exposition: "name value" or "name{labels} value",
// comments skipped. Timestamps after the value are ignored.
func parseMetrics(text string) metrics {
	m := metrics{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		end := strings.LastIndexByte(line, '}')
		var series, rest string
		if end >= 0 && strings.IndexByte(line, '{') >= 0 && strings.IndexByte(line, '{') < end {
			series, rest = line[:end+1], line[end+1:]
		} else {
			i := strings.IndexAny(line, " \t")
			if i < 0 {
				continue
			}
			series, rest = line[:i], line[i:]
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			continue
		}
		m[series] = v
	}
	return m
}

// value returns a series' value.
func (m metrics) value(series string) (float64, bool) {
	v, ok := m[series]
	return v, ok
}

// loadAverage is the one-minute load average on Linux; nil elsewhere.
func loadAverage() *float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return nil
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return nil
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return nil
	}
	return &v
}
