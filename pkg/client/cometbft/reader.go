package cometbft

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/tidwall/gjson"
)

// Reader reads a CometBFT node's events as items, a height at a time, with several calls in
// flight. It keeps the heights it has read (within Options.CacheBytes) for the pages that
// follow: a page may stop inside a block of thousands of transactions and the next resume
// there. Its methods are safe for concurrent use; Close stops its calls in flight and its
// head follower.
type Reader struct {
	c          *rpc
	conc       int
	sem        chan struct{} // one token per call in flight
	cacheLimit int64

	bg     context.Context // prefetches outlive the page that starts them, not the Reader
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	st        Status
	stAt      time.Time // when st was read; zero: never
	metas     map[int64]blockMeta
	metaCalls []*metaCall
	heights   map[int64]*heightFetch
	lru       *list.List // of done heights, most recently used at the front
	cached    int64      // bytes held by done heights
	floor     int64      // v1: the lowest height found to have results
	floorAt   time.Time

	headOnce sync.Once
	head     *head
}

// oldestTTL is how long a v1 node's lowest height with results is taken as known before it
// is looked at again: a data companion may prune results at any time, which status does
// not show.
const oldestTTL = 10 * time.Second

// New returns a Reader of the node at opts.Node. It does not call the node: Detect tells
// first whether it is one.
func New(opts Options) (*Reader, error) {
	c, err := newRPC(opts)
	if err != nil {
		return nil, err
	}
	conc := opts.Concurrency
	if conc <= 0 {
		conc = DefaultConcurrency
	}
	limit := opts.CacheBytes
	if limit <= 0 {
		limit = DefaultCacheBytes
	}
	bg, cancel := context.WithCancel(context.Background())
	return &Reader{
		c: c, conc: conc, sem: make(chan struct{}, conc), cacheLimit: limit, bg: bg, cancel: cancel,
		metas: map[int64]blockMeta{}, heights: map[int64]*heightFetch{}, lru: list.New(),
	}, nil
}

// Close stops the calls in flight and the head follower, and waits for them.
func (r *Reader) Close() error {
	r.cancel()
	r.wg.Wait()
	return nil
}

// Node is the node's base URL, with any password redacted.
func (r *Reader) Node() string { return r.c.base }

// Status calls the node's status.
func (r *Reader) Status(ctx context.Context) (Status, error) {
	return r.status(ctx, 0)
}

// status returns the node's status, read within maxAge (0: read now).
func (r *Reader) status(ctx context.Context, maxAge time.Duration) (Status, error) {
	r.mu.Lock()
	st, at := r.st, r.stAt
	r.mu.Unlock()
	if !at.IsZero() && maxAge > 0 && time.Since(at) < maxAge {
		return st, nil
	}
	var err error
	if err = r.acquire(ctx); err != nil {
		return Status{}, err
	}
	st, err = r.c.fetchStatus(ctx)
	r.release()
	if err != nil {
		return Status{}, err
	}
	r.noteStatus(st)
	return st, nil
}

// noteStatus keeps st unless a later one is kept already.
func (r *Reader) noteStatus(st Status) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if st.Latest >= r.st.Latest || r.st.ChainID != st.ChainID {
		r.st, r.stAt = st, time.Now()
	}
}

// noteLatest records that height h exists (from the head follower).
func (r *Reader) noteLatest(h int64) {
	r.mu.Lock()
	if h > r.st.Latest && !r.stAt.IsZero() {
		r.st.Latest = h
	}
	r.mu.Unlock()
}

func (r *Reader) acquire(ctx context.Context) error {
	select {
	case r.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *Reader) release() { <-r.sem }

// call is rpc.call within the bound on calls in flight.
func (r *Reader) call(ctx context.Context, method string, params any) ([]byte, gjson.Result, error) {
	if err := r.acquire(ctx); err != nil {
		return nil, gjson.Result{}, err
	}
	defer r.release()
	return r.c.call(ctx, method, params)
}

// direction says which way a reader walks heights, for what it reads ahead.
type direction int

const (
	forward direction = iota
	backward
)

// metaCall is a call of the blockchain method in flight, for heights lo to hi.
type metaCall struct {
	lo, hi int64
	done   chan struct{}
	err    error
}

// metasPerCall is how many heights the blockchain method describes at most.
const metasPerCall = 20

// meta returns what the blockchain method says of height h, calling it for h and the heights
// beyond it (in direction dir) when no call has yet.
func (r *Reader) meta(ctx context.Context, h int64, dir direction) (blockMeta, error) {
	for attempt := 0; ; attempt++ {
		r.mu.Lock()
		if m, ok := r.metas[h]; ok {
			r.mu.Unlock()
			return m, nil
		}
		var call *metaCall
		for _, mc := range r.metaCalls {
			if mc.lo <= h && h <= mc.hi {
				call = mc
				break
			}
		}
		if call != nil || attempt > 0 {
			r.mu.Unlock()
			if call == nil {
				break
			}
			select {
			case <-call.done:
			case <-ctx.Done():
				return blockMeta{}, ctx.Err()
			}
			if call.err != nil {
				return blockMeta{}, call.err
			}
			continue
		}
		latest := r.st.Latest
		lo, hi := h, h+metasPerCall-1
		if dir == backward {
			lo, hi = max(h-metasPerCall+1, 1), h
		}
		if latest >= h {
			hi = min(hi, latest)
		} else {
			hi = h
		}
		call = &metaCall{lo: lo, hi: hi, done: make(chan struct{})}
		r.metaCalls = append(r.metaCalls, call)
		r.mu.Unlock()
		call.err = r.fetchMetas(ctx, lo, hi)
		r.mu.Lock()
		for i, mc := range r.metaCalls {
			if mc == call {
				r.metaCalls = append(r.metaCalls[:i], r.metaCalls[i+1:]...)
				break
			}
		}
		r.mu.Unlock()
		close(call.done)
		if call.err != nil {
			return blockMeta{}, call.err
		}
	}
	// The node described the heights around h, not h itself: below its lowest block or
	// above its latest.
	st, err := r.status(ctx, 0)
	if err != nil {
		return blockMeta{}, err
	}
	switch {
	case h < st.Earliest:
		return blockMeta{}, &PrunedError{Height: h, Lowest: st.Earliest}
	case h > st.Latest:
		return blockMeta{}, &NotCommittedError{Height: h, Latest: st.Latest}
	}
	return blockMeta{}, fmt.Errorf("the node's blockchain method does not describe height %d", h)
}

// maxMetas bounds the block metas kept.
const maxMetas = 1 << 14

// fetchMetas calls blockchain for heights lo to hi and keeps what it says.
func (r *Reader) fetchMetas(ctx context.Context, lo, hi int64) error {
	body, res, err := r.call(ctx, "blockchain", map[string]string{"minHeight": strconv.FormatInt(lo, 10), "maxHeight": strconv.FormatInt(hi, 10)})
	if err != nil {
		return err
	}
	var metas []blockMeta
	var bad error
	res.Get("block_metas").ForEach(func(_, m gjson.Result) bool {
		bm, err := parseMeta(m)
		if err != nil {
			bad = err
			return false
		}
		metas = append(metas, bm)
		return true
	})
	if bad != nil {
		return &DecodeError{Method: "blockchain", Body: prefix(body, 80), Err: bad}
	}
	r.mu.Lock()
	if len(r.metas)+len(metas) > maxMetas {
		clear(r.metas)
	}
	for _, m := range metas {
		r.metas[m.height] = m
	}
	r.mu.Unlock()
	return nil
}

func parseMeta(m gjson.Result) (blockMeta, error) {
	hdr := m.Get("header")
	h, err := intField(hdr, "height")
	if err != nil {
		return blockMeta{}, err
	}
	n, err := intField(m, "num_txs")
	if err != nil {
		return blockMeta{}, err
	}
	t, err := time.Parse(time.RFC3339Nano, hdr.Get("time").String())
	if err != nil {
		return blockMeta{}, fmt.Errorf("height %d: block time: %w", h, err)
	}
	hash := m.Get("block_id.hash").String()
	if n < 0 || n > EndIndex-1 || hash == "" {
		return blockMeta{}, fmt.Errorf("height %d: %d transactions, block hash %q", h, n, hash)
	}
	return blockMeta{height: h, time: t, hash: hash, numTxs: int(n)}, nil
}

// heightFetch is a height being read, or read.
type heightFetch struct {
	h    int64
	done chan struct{}
	data *heightData
	err  error
	elem *list.Element // in the LRU list once done without error
}

// height returns height h's items, reading them unless they are read or being read.
func (r *Reader) height(ctx context.Context, h int64, dir direction) (*heightData, error) {
	f := r.start(h, dir)
	select {
	case <-f.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if f.err != nil {
		return nil, f.err
	}
	r.mu.Lock()
	if f.elem != nil {
		r.lru.MoveToFront(f.elem)
	}
	r.mu.Unlock()
	return f.data, nil
}

// start returns the fetch of height h, starting it if there is none (a failed one is
// started again).
func (r *Reader) start(h int64, dir direction) *heightFetch {
	r.mu.Lock()
	defer r.mu.Unlock()
	if f, ok := r.heights[h]; ok {
		select {
		case <-f.done:
			if f.err == nil {
				return f
			}
			delete(r.heights, h)
		default:
			return f
		}
	}
	f := &heightFetch{h: h, done: make(chan struct{})}
	r.heights[h] = f
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		data, err := r.fetchHeight(r.bg, h, dir)
		r.mu.Lock()
		f.data, f.err = data, err
		if err == nil {
			f.elem = r.lru.PushFront(f)
			r.cached += data.size
			r.evict()
		}
		r.mu.Unlock()
		close(f.done)
	}()
	return f
}

// evict drops the least recently used heights while more than the cache's bytes are held.
// r.mu is held.
func (r *Reader) evict() {
	for r.cached > r.cacheLimit && r.lru.Len() > 1 {
		e := r.lru.Back()
		f := e.Value.(*heightFetch)
		r.lru.Remove(e)
		r.cached -= f.data.size
		if r.heights[f.h] == f {
			delete(r.heights, f.h)
		}
	}
}

// full reports whether the heights held fill the cache: reading ahead stops.
func (r *Reader) full() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cached >= r.cacheLimit*3/4
}

// prefetch starts reading the heights from h in direction dir, up to n of them and not past
// limit (the latest height going forward, the lowest going back).
func (r *Reader) prefetch(h int64, n int, limit int64, dir direction) {
	for i := 0; i < n; i++ {
		if dir == forward && h > limit || dir == backward && h < limit || r.full() {
			return
		}
		r.start(h, dir)
		if dir == forward {
			h++
		} else {
			h--
		}
	}
}

// fetchHeight reads height h: its meta, its block results, and its block when it holds
// transactions, those two at once.
func (r *Reader) fetchHeight(ctx context.Context, h int64, dir direction) (*heightData, error) {
	m, err := r.meta(ctx, h, dir)
	if err != nil {
		return nil, err
	}
	var (
		txs      []string
		blockErr error
		wg       sync.WaitGroup
	)
	if m.numTxs > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			txs, blockErr = r.blockTxs(ctx, h)
		}()
	}
	body, res, err := r.call(ctx, "block_results", heightOf(h))
	wg.Wait()
	if err != nil {
		return nil, err
	}
	if blockErr != nil {
		return nil, blockErr
	}
	d, err := buildHeight(m, res, txs)
	if err != nil {
		return nil, &DecodeError{Method: "block_results", Body: prefix(body, 80), Err: err}
	}
	return d, nil
}

// blockTxs returns the transactions of block h, in base64.
func (r *Reader) blockTxs(ctx context.Context, h int64) ([]string, error) {
	body, res, err := r.call(ctx, "block", heightOf(h))
	if err != nil {
		return nil, err
	}
	block := res.Get("block")
	if bh, err := intField(block.Get("header"), "height"); err != nil || bh != h {
		return nil, &DecodeError{Method: "block", Body: prefix(body, 80), Err: fmt.Errorf("not block %d", h)}
	}
	arr := block.Get("data.txs")
	if arr.Type != gjson.Null && !arr.IsArray() {
		return nil, &DecodeError{Method: "block", Body: prefix(body, 80), Err: errors.New("data.txs is not an array")}
	}
	var txs []string
	var bad bool
	arr.ForEach(func(_, tx gjson.Result) bool {
		if tx.Type != gjson.String {
			bad = true
			return false
		}
		txs = append(txs, tx.Str)
		return true
	})
	if bad {
		return nil, &DecodeError{Method: "block", Body: prefix(body, 80), Err: errors.New("a transaction that is not a string")}
	}
	return txs, nil
}
