package cometbft

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/evtctl/evtctl/internal/peer"
	"github.com/evtctl/evtctl/pkg/client"
)

// Defaults of Options.
const (
	DefaultConcurrency = 8
	DefaultMaxBody     = 256 << 20
	DefaultCacheBytes  = 64 << 20
	// callTimeout bounds one RPC call: a block_results of thousands of transactions
	// takes a node a quarter of a second on loopback.
	callTimeout = 60 * time.Second
)

// Scheme is the prefix that names a CometBFT node in a node address:
// "cometbft+http://host:26657".
const Scheme = "cometbft+"

// Options configure a Reader. The embedded client options say how to reach the node
// (Node, Token, CAFile, Insecure, UserAgent, HTTPClient); Node may carry the Scheme prefix.
type Options struct {
	client.Options
	// Concurrency bounds the RPC calls in flight; default DefaultConcurrency.
	Concurrency int
	// MaxBody bounds one reply's size; default DefaultMaxBody.
	MaxBody int64
	// CacheBytes bounds the heights kept read for the next page; default DefaultCacheBytes.
	CacheBytes int64
}

// rpc calls one node's JSON-RPC methods over HTTP POST.
type rpc struct {
	endpoint string // the JSON-RPC endpoint: the base URL with a trailing slash
	base     string // the base URL for messages, password redacted
	wsURL    string // the websocket endpoint (/websocket; /v1/websocket tried when that is missing)
	token    string
	ua       string
	hc       *http.Client
	maxBody  int64
	id       atomic.Int64
}

func newRPC(opts Options) (*rpc, error) {
	node := strings.TrimPrefix(strings.TrimSpace(opts.Node), Scheme)
	base, err := client.NormalizeNode(node)
	if err != nil {
		return nil, err
	}
	hc := opts.HTTPClient
	if hc == nil {
		if hc, err = client.HTTPClient(opts.CAFile, opts.Insecure, max(opts.Concurrency, DefaultConcurrency)+4); err != nil {
			return nil, err
		}
	}
	ua := cmp.Or(opts.UserAgent, "evtctl")
	display := base
	u, err := url.Parse(base)
	if err == nil {
		display = u.Redacted()
	}
	ws := *u
	ws.Scheme = map[string]string{"http": "ws", "https": "wss"}[u.Scheme]
	ws.Path = strings.TrimRight(u.Path, "/") + "/websocket"
	maxBody := opts.MaxBody
	if maxBody <= 0 {
		maxBody = DefaultMaxBody
	}
	return &rpc{endpoint: base + "/", base: display, wsURL: ws.String(), token: opts.Token, ua: ua, hc: hc, maxBody: maxBody}, nil
}

type rpcRequest struct {
	JSONRPC string `json:"jsonrpc"`
	ID      int64  `json:"id"`
	Method  string `json:"method"`
	Params  any    `json:"params"`
}

// call calls method with params and returns the body and the span of its result member.
// An error the node answers is a *client.RPCError, or one of this package's errors that
// wraps it (see classify); a reply that is not HTTP 200 and holds no JSON-RPC error is a
// *client.HTTPError.
func (c *rpc) call(ctx context.Context, method string, params any) (body []byte, result gjson.Result, err error) {
	if params == nil {
		params = struct{}{}
	}
	req, err := json.Marshal(rpcRequest{JSONRPC: "2.0", ID: c.id.Add(1), Method: method, Params: params})
	if err != nil {
		return nil, result, err
	}
	callCtx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(callCtx, http.MethodPost, c.endpoint, bytes.NewReader(req))
	if err != nil {
		return nil, result, err
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("User-Agent", c.ua)
	// Every method this package calls only reads: marked idempotent (the mark is not sent),
	// a call that meets a kept-alive connection the node has closed is sent again on a new
	// one.
	hr.Header["Idempotency-Key"] = nil
	if c.token != "" {
		hr.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(hr)
	if err != nil {
		return nil, result, transportError(ctx, err)
	}
	defer resp.Body.Close()
	body, err = c.readBody(resp)
	if err != nil {
		return nil, result, transportError(ctx, err)
	}
	return c.decode(method, resp, body)
}

// readBody reads a reply of at most maxBody bytes, in one allocation when its length is
// known.
func (c *rpc) readBody(resp *http.Response) ([]byte, error) {
	if n := resp.ContentLength; n > c.maxBody {
		return nil, fmt.Errorf("a reply of %d bytes is larger than the limit of %d bytes", n, c.maxBody)
	} else if n > 0 {
		b := make([]byte, n)
		_, err := io.ReadFull(resp.Body, b)
		return b, err
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, c.maxBody+1))
	if err == nil && int64(len(b)) > c.maxBody {
		return nil, fmt.Errorf("a reply larger than the limit of %d bytes", c.maxBody)
	}
	return b, err
}

func (c *rpc) decode(method string, resp *http.Response, body []byte) ([]byte, gjson.Result, error) {
	var none gjson.Result
	if !gjson.ValidBytes(body) {
		if resp.StatusCode != http.StatusOK {
			form := peer.FormOf(body)
			return nil, none, &client.HTTPError{Status: resp.StatusCode, Message: peer.Text(body, 200), Page: form == peer.HTMLBody || form == peer.TextBody}
		}
		return nil, none, &DecodeError{Method: method, Body: prefix(body, 80), Err: errors.New("not valid JSON")}
	}
	doc := jsonOf(body)
	if e := doc.Get("error"); e.Exists() && e.Type != gjson.Null {
		re := &client.RPCError{Code: int(e.Get("code").Int()), Message: e.Get("message").String(), Data: e.Get("data").String()}
		err := classify(re)
		if de, ok := err.(*DiscardError); ok {
			de.Node = c.base
		}
		return nil, none, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, none, &client.HTTPError{Status: resp.StatusCode, Message: peer.Text(body, 200)}
	}
	res := doc.Get("result")
	if !res.IsObject() {
		return nil, none, &DecodeError{Method: method, Body: prefix(body, 80), Err: errors.New("no result object and no error")}
	}
	return body, res, nil
}

// DecodeError is a reply that is not what the method returns.
type DecodeError struct {
	Method string
	Body   string // the start of the reply
	Err    error
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("the node's reply to %s is not understood: %v (reply begins %q)", e.Method, e.Err, e.Body)
}
func (e *DecodeError) Unwrap() error { return e.Err }

// NotCommittedError is a height above the node's latest: not committed yet, or not yet
// known to this node.
type NotCommittedError struct {
	Height, Latest int64
	Err            *client.RPCError
}

func (e *NotCommittedError) Error() string {
	return fmt.Sprintf("height %d is not committed yet (the node's latest height is %d)", e.Height, e.Latest)
}
func (e *NotCommittedError) Unwrap() error { return e.Err }

// PrunedError is a height below the lowest the node keeps.
type PrunedError struct {
	Height, Lowest int64
	Err            *client.RPCError
}

func (e *PrunedError) Error() string {
	return fmt.Sprintf("height %d is pruned on the node (its lowest height is %d)", e.Height, e.Lowest)
}
func (e *PrunedError) Unwrap() error { return e.Err }

// ResultsMissingError is a height whose block the node keeps but whose results it does not:
// pruned by a data companion (CometBFT v1.0), or, at the newest height, not saved yet.
type ResultsMissingError struct {
	Height int64
	Err    *client.RPCError
}

func (e *ResultsMissingError) Error() string {
	return fmt.Sprintf("the node has no block results for height %d", e.Height)
}
func (e *ResultsMissingError) Unwrap() error { return e.Err }

// DiscardError is a node that does not keep block results at all
// (storage.discard_abci_responses = true): its events cannot be read. No retry mends it.
type DiscardError struct {
	Node string
	Err  *client.RPCError
}

func (e *DiscardError) Error() string {
	return fmt.Sprintf("%s does not keep block results (it answers %q): a node set with "+
		"storage.discard_abci_responses = true cannot serve its events; use a node that keeps them "+
		"(discard_abci_responses = false)", e.Node, e.Err.Data)
}
func (e *DiscardError) Unwrap() error { return e.Err }

var (
	notCommittedRE = regexp.MustCompile(`^height (\d+) must be less than or equal to the current blockchain height (\d+)$`)
	prunedRE       = regexp.MustCompile(`^height (\d+) is not available, lowest height is (\d+)$`)
	missingRE      = regexp.MustCompile(`^could not find results for height #(\d+)$`)
	discardRE      = regexp.MustCompile(`^node is not persisting (abci|finalize block) responses$`)
)

// classify turns the node's error into one of this package's when its data says which:
// CometBFT gives every one of them code -32603 and tells them apart only by the text. The
// result wraps re, so client.Retryable refuses all of them, as it refuses a node's -32603.
func classify(re *client.RPCError) error {
	d := re.Data
	if m := notCommittedRE.FindStringSubmatch(d); m != nil {
		return &NotCommittedError{Height: atoi(m[1]), Latest: atoi(m[2]), Err: re}
	}
	if m := prunedRE.FindStringSubmatch(d); m != nil {
		return &PrunedError{Height: atoi(m[1]), Lowest: atoi(m[2]), Err: re}
	}
	if m := missingRE.FindStringSubmatch(d); m != nil {
		return &ResultsMissingError{Height: atoi(m[1]), Err: re}
	}
	if discardRE.MatchString(d) {
		return &DiscardError{Err: re}
	}
	return re
}

func atoi(s string) int64 {
	v, _ := strconv.ParseInt(s, 10, 64)
	return v
}

// transportError drops Go's "Post "url": " prefix and says what failed.
func transportError(ctx context.Context, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		var ne net.Error
		if errors.As(ue.Err, &ne) && ne.Timeout() && ctx.Err() == nil {
			return fmt.Errorf("node did not answer in time: %v", ue.Err)
		}
		return fmt.Errorf("cannot reach the node: %w", ue.Err)
	}
	if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("node did not answer in time: %v", err)
	}
	return err
}

// prefix is the start of a body for a message, in one line.
func prefix(b []byte, n int) string {
	s := strings.Join(strings.Fields(strings.ToValidUTF8(string(b[:min(len(b), 4*n)]), "\uFFFD")), " ")
	if len(s) > n {
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		return s[:n] + "…"
	}
	return s
}

// heightParam is the params of a method that takes a height: CometBFT reads int64 params
// from JSON strings.
type heightParam struct {
	Height string `json:"height"`
}

func heightOf(h int64) heightParam { return heightParam{Height: strconv.FormatInt(h, 10)} }
