package cometbft

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/evtctl/evtctl/pkg/client"
)

// evtctl bench measures a chain through these methods of its source, which it finds by their
// names: what the node is; a plain program's read of the same heights, to set evtctl's
// reading beside; and transactions it sends and times from their block's commit to the
// tail's output.

// BenchNode says what the node is, for a bench's report: its kind, its version, and how
// evtctl reads it.
func (s *source) BenchNode(ctx context.Context) (kind, version, how string, err error) {
	st, err := s.r.status(ctx, statusAge)
	if err != nil {
		return "", "", "", err
	}
	how = fmt.Sprintf("a CometBFT node (v%s, chain %q): evtctl reads each height with block_results, and block where the height holds "+
		"transactions (the blockchain method tells which, %d heights a call), %d calls in flight", st.Version, st.ChainID, metasPerCall, s.r.conc)
	return "cometbft", st.Version, how, nil
}

// PlainRead reads the heights from the one after `after` (the oldest the node serves, for
// "") to through's as a plain Go program would, with as many calls in flight as evtctl's
// reader makes: CompareRead's plain loop. It counts the items the heights give, the heights
// and the ABCI events. The stretch must be of whole heights: after and through at a height's
// end (through may be its last item).
func (s *source) PlainRead(ctx context.Context, after, through string) (counts map[string]int64, elapsed time.Duration, err error) {
	a, err := position(after)
	if err != nil {
		return nil, 0, err
	}
	t, err := ParseCursor(through)
	if err != nil || t.IsZero() {
		return nil, 0, fmt.Errorf("no stretch of the chain ends at %q", through)
	}
	var from int64
	if a.IsZero() {
		oldest, err := s.r.Oldest(ctx)
		if err != nil {
			return nil, 0, err
		}
		from = oldest.Height
	} else {
		h, i := next(a)
		if i != 0 {
			return nil, 0, fmt.Errorf("the stretch after %s begins inside height %d: a plain read reads whole heights", after, h)
		}
		from = h
	}
	if t.Index < EndIndex {
		m, err := s.r.meta(ctx, t.Height, backward)
		if err != nil {
			return nil, 0, err
		}
		if t.Index < int64(m.numTxs) {
			return nil, 0, fmt.Errorf("the stretch through %s ends inside height %d: a plain read reads whole heights", through, t.Height)
		}
	}
	if t.Height < from {
		return nil, 0, fmt.Errorf("no heights after %q through %q", after, through)
	}
	rate, err := readPlain(ctx, s.r.c, s.r.conc, from, t.Height)
	if err != nil {
		return nil, 0, err
	}
	return map[string]int64{"items": rate.Items, "heights": rate.Heights, "abci_events": rate.Events}, rate.Elapsed, nil
}

// PlainReadHow says what PlainRead does, for the report.
func (s *source) PlainReadHow() string {
	return fmt.Sprintf("plain: a Go loop over the same heights, %d workers each calling block_results and then block for one height after "+
		"another (POST, decoded with encoding/json): as many calls in flight as evtctl's reader", s.r.conc)
}

// benchPrefix begins the key of the transactions a bench sends.
const benchPrefix = "evtctl-bench-"

// Submit sends a transaction that carries mark, of about size bytes, with broadcast_tx_sync:
// it returns once the node's mempool has taken it (CheckTx passed), before any block holds
// it. The transaction is "evtctl-bench-MARK=xxx…", a key and a value, as the kvstore
// application takes them; a chain whose application refuses it is said to.
func (s *source) Submit(ctx context.Context, mark string, size int) error {
	tx := benchPrefix + mark + "="
	tx += strings.Repeat("x", max(size-len(tx), 1))
	// Not within the reader's bound on calls in flight: the sender's calls must not wait
	// for the reads of the tail it is timed against.
	_, res, err := s.r.c.call(ctx, "broadcast_tx_sync", map[string][]byte{"tx": []byte(tx)})
	if err != nil {
		return err
	}
	if code := res.Get("code").Int(); code != 0 {
		return fmt.Errorf("the node refused the bench's transaction (CheckTx code %d: %q): bench latency needs a chain whose application "+
			"takes any key=value transaction, as the kvstore application does", code, prefix([]byte(res.Get("log").String()), 200))
	}
	return nil
}

// Mark is the mark of a transaction Submit sent, "" for any other item.
func (s *source) Mark(it client.Item) string {
	if it.Event != EventTx {
		return ""
	}
	b64 := jsonOf(it.Data).Get("value.tx").String()
	// The mark is in the first bytes: decode no more of the transaction than holds it.
	n := min(len(b64), base64.StdEncoding.EncodedLen(len(benchPrefix)+64)) &^ 3
	raw, err := base64.StdEncoding.DecodeString(b64[:n])
	if err != nil {
		return ""
	}
	key, _, found := strings.Cut(string(raw), "=")
	mark, ok := strings.CutPrefix(key, benchPrefix)
	if !ok || !found {
		return ""
	}
	return mark
}

// Committed returns when the chain committed the block of the item at pos — the median of
// the times in its commit's precommit votes, as BFT time takes them for the next block's
// time: the validators' clocks — and how long after the commit of the block before it that
// was (the block time then).
func (s *source) Committed(ctx context.Context, pos string) (at time.Time, blockTime time.Duration, err error) {
	p, err := ParseCursor(pos)
	if err != nil || p.IsZero() {
		return time.Time{}, 0, fmt.Errorf("%q is no item of a chain", pos)
	}
	if at, err = s.commitTime(ctx, p.Height); err != nil || p.Height <= 1 {
		return at, 0, err
	}
	prev, err := s.commitTime(ctx, p.Height-1)
	if err != nil {
		return at, 0, err
	}
	return at, at.Sub(prev), nil
}

// commitTime is when the chain committed block h (see Committed), read once.
func (s *source) commitTime(ctx context.Context, h int64) (time.Time, error) {
	s.mu.Lock()
	t, ok := s.commits[h]
	s.mu.Unlock()
	if ok {
		return t, nil
	}
	body, res, err := s.r.call(ctx, "commit", heightOf(h))
	if err != nil {
		return time.Time{}, err
	}
	var times []time.Time
	res.Get("signed_header.commit.signatures").ForEach(func(_, sig gjson.Result) bool {
		// Only votes for the block (BlockIDFlagCommit) count, as BFT time counts them.
		if sig.Get("block_id_flag").Int() == 2 {
			if t, err := time.Parse(time.RFC3339Nano, sig.Get("timestamp").String()); err == nil {
				times = append(times, t)
			}
		}
		return true
	})
	if len(times) == 0 {
		return time.Time{}, &DecodeError{Method: "commit", Body: prefix(body, 80), Err: fmt.Errorf("no votes for block %d", h)}
	}
	slices.SortFunc(times, time.Time.Compare)
	t = times[len(times)/2]
	s.mu.Lock()
	if s.commits == nil || len(s.commits) > 4096 {
		s.commits = map[int64]time.Time{}
	}
	s.commits[h] = t
	s.mu.Unlock()
	return t, nil
}
