package cometbft

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// The oldest item of a chain, as a node serves it, is item 0 of the lowest height whose
// block results it answers. On v0.37 and v0.38 a node prunes results with their blocks, so
// that is the lowest block it keeps (status's earliest_block_height). A v1 node may prune
// results apart from blocks, at a data companion's request, which status does not show:
// there the lowest height that answers is looked for above the lowest block (a binary
// search, since results are pruned from the bottom), and kept for oldestTTL.

// knownOldest is the oldest height as far as the reader knows without asking the node.
func (r *Reader) knownOldest(st Status) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return max(st.Earliest, r.floor, 1)
}

// oldestHeight returns the lowest height whose block results the node answers; fresh looks
// again on a v1 node even if it looked within oldestTTL.
func (r *Reader) oldestHeight(ctx context.Context, st Status, fresh bool) (int64, error) {
	low := r.knownOldest(st)
	if st.Line != Line1 || st.Latest < low {
		return low, nil
	}
	r.mu.Lock()
	recent := !r.floorAt.IsZero() && time.Since(r.floorAt) < oldestTTL
	r.mu.Unlock()
	if recent && !fresh {
		return low, nil
	}
	h, err := r.searchOldest(ctx, low, st.Latest)
	if err != nil {
		return 0, err
	}
	r.mu.Lock()
	r.floor = max(r.floor, h)
	r.floorAt = time.Now()
	r.mu.Unlock()
	return h, nil
}

// searchOldest finds the lowest height from lo to latest whose block results the node
// answers: lo itself when it does, else by binary search above it.
func (r *Reader) searchOldest(ctx context.Context, lo, latest int64) (int64, error) {
	ok, lowest, err := r.hasResults(ctx, lo)
	if err != nil || ok {
		return lo, err
	}
	// Results answer at latest; at worst the newest are being saved.
	lo, hi := max(lo+1, lowest), latest
	for lo < hi {
		mid := lo + (hi-lo)/2
		ok, lowest, err := r.hasResults(ctx, mid)
		switch {
		case err != nil:
			return 0, err
		case ok:
			hi = mid
		default:
			lo = max(mid+1, lowest)
		}
	}
	return lo, nil
}

// hasResults reports whether the node answers height h's block results; when the block is
// pruned, lowest is the lowest block the node keeps. A height not committed yet counts as
// answering: it will.
func (r *Reader) hasResults(ctx context.Context, h int64) (ok bool, lowest int64, err error) {
	_, err = r.height(ctx, h, forward)
	var (
		pe *PrunedError
		rm *ResultsMissingError
		nc *NotCommittedError
	)
	switch {
	case err == nil, errors.As(err, &nc):
		return true, 0, nil
	case errors.As(err, &pe):
		return false, pe.Lowest, nil
	case errors.As(err, &rm):
		return false, 0, nil
	}
	return false, 0, err
}

// Oldest is the chain's oldest item as the node serves it: item 0 of the lowest height whose
// block results it answers.
func (r *Reader) Oldest(ctx context.Context) (Position, error) {
	st, err := r.status(ctx, statusAge)
	if err != nil {
		return Position{}, err
	}
	h, err := r.oldestHeight(ctx, st, false)
	if err != nil || st.Latest < h {
		return Position{}, err
	}
	return Position{Height: h}, nil
}

// Newest is the chain's newest item: the latest height's last item.
func (r *Reader) Newest(ctx context.Context) (Position, error) {
	st, err := r.status(ctx, 0)
	if err != nil || st.Latest <= 0 {
		return Position{}, err
	}
	m, err := r.meta(ctx, st.Latest, backward)
	if err != nil {
		return Position{}, err
	}
	return Position{Height: st.Latest, Index: int64(m.numTxs)}, nil
}

// BlockTime is the time of block h.
func (r *Reader) BlockTime(ctx context.Context, h int64) (time.Time, error) {
	m, err := r.meta(ctx, h, forward)
	return m.time, err
}

// HeightAt returns the lowest height whose block time is t or later, by binary search over
// the blocks the node keeps; the height after the latest when t is later than it, the
// lowest block when t is earlier.
func (r *Reader) HeightAt(ctx context.Context, t time.Time) (int64, error) {
	st, err := r.status(ctx, 0)
	if err != nil {
		return 0, err
	}
	if st.Latest <= 0 {
		return 1, nil
	}
	lo, hi := max(st.Earliest, 1), st.Latest
	if !st.LatestTime.IsZero() && st.LatestTime.Before(t) {
		return st.Latest + 1, nil
	}
	for lo < hi {
		mid := lo + (hi-lo)/2
		m, err := r.meta(ctx, mid, forward)
		var pe *PrunedError
		if errors.As(err, &pe) {
			lo = max(mid+1, pe.Lowest) // pruned meanwhile
			continue
		}
		if err != nil {
			return 0, err
		}
		if m.time.Before(t) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo == st.Latest {
		m, err := r.meta(ctx, lo, backward)
		if err != nil {
			return 0, err
		}
		if m.time.Before(t) {
			return lo + 1, nil
		}
	}
	return lo, nil
}

// Since returns the After of a forward page that starts at the first block of time t or
// later: the zero Position (the oldest height, with no gap) when t is before the oldest
// height the node serves.
func (r *Reader) Since(ctx context.Context, t time.Time) (Position, error) {
	h, err := r.HeightAt(ctx, t)
	if err != nil {
		return Position{}, err
	}
	oldest, err := r.Oldest(ctx)
	if err != nil {
		return Position{}, err
	}
	if h <= oldest.Height {
		return Position{}, nil
	}
	return EndOf(h - 1), nil
}

// Identity names a chain and a block of it: enough to tell, beside a saved cursor, another
// chain or a chain rolled back and rebuilt.
type Identity struct {
	ChainID   string `json:"chain_id"`
	Height    int64  `json:"height,omitempty"`
	BlockHash string `json:"block_hash,omitempty"`
}

// IdentityAt returns the chain's id and the hash of block h.
func (r *Reader) IdentityAt(ctx context.Context, h int64) (Identity, error) {
	st, err := r.status(ctx, statusAge)
	if err != nil {
		return Identity{}, err
	}
	m, err := r.meta(ctx, h, forward)
	if err != nil {
		return Identity{}, err
	}
	return Identity{ChainID: st.ChainID, Height: h, BlockHash: m.hash}, nil
}

// ChainMismatchError is a saved position of another chain than the node's.
type ChainMismatchError struct {
	Node       string
	Want, Have Identity
}

func (e *ChainMismatchError) Error() string {
	if e.Want.ChainID != e.Have.ChainID {
		return fmt.Sprintf("%s serves chain %q, not chain %q of the saved position", e.Node, e.Have.ChainID, e.Want.ChainID)
	}
	return fmt.Sprintf("%s has block %s at height %d, not block %s of the saved position: the chain was rolled back or rebuilt under the same id %q",
		e.Node, e.Have.BlockHash, e.Want.Height, e.Want.BlockHash, e.Want.ChainID)
}

// CheckIdentity tells whether the node serves the chain of id: a *ChainMismatchError when
// its chain id differs, or its block at id.Height has another hash. checked is false when
// the block could not be compared: the node no longer keeps it, or does not have it yet (an
// endpoint behind the one the position was saved from).
func (r *Reader) CheckIdentity(ctx context.Context, id Identity) (checked bool, err error) {
	st, err := r.status(ctx, statusAge)
	if err != nil {
		return false, err
	}
	if st.ChainID != id.ChainID {
		return false, &ChainMismatchError{Node: r.c.base, Want: id, Have: Identity{ChainID: st.ChainID}}
	}
	if id.Height <= 0 || id.BlockHash == "" {
		return false, nil
	}
	m, err := r.meta(ctx, id.Height, forward)
	var (
		pe *PrunedError
		nc *NotCommittedError
	)
	switch {
	case errors.As(err, &pe), errors.As(err, &nc):
		return false, nil
	case err != nil:
		return false, err
	case m.hash != id.BlockHash:
		return true, &ChainMismatchError{Node: r.c.base, Want: id, Have: Identity{ChainID: st.ChainID, Height: id.Height, BlockHash: m.hash}}
	}
	return true, nil
}
