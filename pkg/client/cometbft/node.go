package cometbft

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/evtctl/evtctl/pkg/client"
)

// Line is a CometBFT release line: the layout of its block results and its websocket.
type Line string

// The lines this package reads.
const (
	Line037 Line = "0.37" // begin_block_events and end_block_events
	Line038 Line = "0.38" // finalize_block_events (also the later 0.x releases)
	Line1   Line = "1"    // v1.x: finalize_block_events; results can be pruned apart from blocks
)

// Status is what a node says of itself and its chain.
type Status struct {
	ChainID      string // node_info.network
	Version      string // node_info.version, e.g. "0.38.26"
	Line         Line
	NodeID       string
	Latest       int64 // sync_info.latest_block_height
	LatestTime   time.Time
	LatestHash   string
	Earliest     int64 // sync_info.earliest_block_height: the lowest block the node keeps
	EarliestTime time.Time
	CatchingUp   bool
}

// NotCometBFTError is a node that is not a CometBFT node this package reads: it does not
// answer status as one, it serves the events method (a Tendermint v0.36 node, which the
// events client reads), or it runs a line this package does not read.
type NotCometBFTError struct {
	Node   string
	Reason string
	Err    error // the failure behind Reason, if any
}

func (e *NotCometBFTError) Error() string {
	return fmt.Sprintf("%s is not a CometBFT node evtctl reads: %s", e.Node, e.Reason)
}
func (e *NotCometBFTError) Unwrap() error { return e.Err }

// LineOf returns the line of a node version ("0.38.26", "v1.0.1"), or an error saying why
// the version is not one this package reads.
func LineOf(version string) (Line, error) {
	v := strings.TrimPrefix(strings.TrimSpace(version), "v")
	majorText, rest, ok := strings.Cut(v, ".")
	minorText, _, _ := strings.Cut(rest, ".")
	minorText, _, _ = strings.Cut(minorText, "-")
	major, err1 := strconv.Atoi(majorText)
	minor, err2 := strconv.Atoi(minorText)
	if !ok || err1 != nil || err2 != nil {
		return "", fmt.Errorf("version %q is not a CometBFT version", version)
	}
	switch {
	case major >= 1:
		return Line1, nil
	case minor == 37:
		return Line037, nil
	case minor >= 38:
		return Line038, nil
	case minor == 34:
		return "", fmt.Errorf("version %s is of the 0.34 line, whose event attributes are base64; evtctl reads the v0.37, v0.38 and v1 lines", version)
	}
	return "", fmt.Errorf("version %s is not of a CometBFT line evtctl reads (v0.37, v0.38, v1)", version)
}

// fetchStatus calls status.
func (c *rpc) fetchStatus(ctx context.Context) (Status, error) {
	body, res, err := c.call(ctx, "status", nil)
	if err != nil {
		return Status{}, err
	}
	st, err := parseStatus(res)
	if err != nil {
		return Status{}, &DecodeError{Method: "status", Body: prefix(body, 80), Err: err}
	}
	return st, nil
}

func parseStatus(res gjson.Result) (Status, error) {
	ni, si := res.Get("node_info"), res.Get("sync_info")
	if !ni.IsObject() || !si.IsObject() {
		return Status{}, errors.New("no node_info and sync_info")
	}
	st := Status{
		ChainID:    ni.Get("network").String(),
		Version:    ni.Get("version").String(),
		NodeID:     ni.Get("id").String(),
		LatestHash: si.Get("latest_block_hash").String(),
		CatchingUp: si.Get("catching_up").Bool(),
	}
	var err error
	if st.Latest, err = intField(si, "latest_block_height"); err != nil {
		return Status{}, err
	}
	if st.Earliest, err = intField(si, "earliest_block_height"); err != nil {
		return Status{}, err
	}
	st.LatestTime, _ = time.Parse(time.RFC3339Nano, si.Get("latest_block_time").String())
	st.EarliestTime, _ = time.Parse(time.RFC3339Nano, si.Get("earliest_block_time").String())
	if st.ChainID == "" {
		return Status{}, errors.New("no chain id (node_info.network)")
	}
	st.Line, _ = LineOf(st.Version)
	return st, nil
}

// intField reads an integer written as a JSON string (CometBFT's int64) or number.
func intField(obj gjson.Result, name string) (int64, error) {
	v := obj.Get(name)
	switch v.Type {
	case gjson.String, gjson.Number:
		n, err := strconv.ParseInt(v.String(), 10, 64)
		if err == nil {
			return n, nil
		}
	}
	return 0, fmt.Errorf("%s is not an integer: %s", name, prefix([]byte(v.Raw), 40))
}

// Detect tells whether the node at opts.Node is a CometBFT node this package reads: one
// that answers status with a version of the v0.37, v0.38 or v1 lines and has no events
// method. It also asks for the newest height's block results, so that a node that does not
// keep them is known at once (a *DiscardError). A node that is something else is a
// *NotCometBFTError; a node that cannot be reached is the transport's error.
func Detect(ctx context.Context, opts Options) (Status, error) {
	c, err := newRPC(opts)
	if err != nil {
		return Status{}, err
	}
	return c.detect(ctx)
}

func (c *rpc) detect(ctx context.Context) (Status, error) {
	st, err := c.fetchStatus(ctx)
	if err != nil {
		var (
			he *client.HTTPError
			re *client.RPCError
			de *DecodeError
		)
		switch {
		case errors.As(err, &he):
			return Status{}, &NotCometBFTError{Node: c.base, Reason: "it answers status with " + he.Error(), Err: err}
		case errors.As(err, &re):
			return Status{}, &NotCometBFTError{Node: c.base, Reason: "it answers status with the error " + re.Error(), Err: err}
		case errors.As(err, &de):
			return Status{}, &NotCometBFTError{Node: c.base, Reason: "its reply to status is not a node's status", Err: err}
		}
		return Status{}, err
	}
	// A Tendermint node of the unreleased v0.36 line reports a 0.35 version and serves the
	// events method; a CometBFT node has no such method.
	if _, _, err := c.call(ctx, "events", struct{}{}); err == nil {
		return Status{}, &NotCometBFTError{Node: c.base, Reason: "it serves the events method (a Tendermint node: read it as one)"}
	} else {
		var re *client.RPCError
		if !errors.As(err, &re) || re.Code != -32601 {
			return Status{}, &NotCometBFTError{Node: c.base, Reason: "its answer to the events method is not \"method not found\": " + err.Error(), Err: err}
		}
	}
	if _, err := LineOf(st.Version); err != nil {
		return Status{}, &NotCometBFTError{Node: c.base, Reason: err.Error()}
	}
	if st.Latest > 0 {
		if _, _, err := c.call(ctx, "block_results", heightOf(st.Latest)); err != nil {
			var de *DiscardError
			if errors.As(err, &de) {
				return st, err
			}
			// Other failures (the newest results not saved yet) are for the reader to meet.
		}
	}
	return st, nil
}
