package eventlog

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/evtctl/evtctl/internal/atomicfile"
	"github.com/evtctl/evtctl/pkg/cursor"
)

// SyncMode says when an append is acknowledged.
type SyncMode int

const (
	// SyncAlways acknowledges an append once its bytes are fsynced: it survives a crash of
	// the process and of the machine. Appends that arrive together share one fsync.
	SyncAlways SyncMode = iota
	// SyncNone acknowledges once the bytes are written to the operating system: they
	// survive a crash of the process (kill -9) but not a power loss.
	SyncNone
)

// Options configure a Log. Zero values mean the defaults noted.
type Options struct {
	Dir          string        // data directory; "" keeps the log in memory
	Window       time.Duration // drop items older than this; 0 keeps them regardless of age
	MaxItems     uint64        // keep at most this many items; 0: no limit
	MaxBytes     int64         // keep at most about this many bytes; 0: no limit
	DedupeWindow time.Duration // suppress a repeated (source, id) this long; 0: default 10m; <0: off
	DedupeMax    int           // remember at most this many recent keys; 0: default 1,000,000
	Sync         SyncMode
	SegmentBytes int64 // roll segments at about this size; 0: default 64 MiB
	Logger       *slog.Logger
	Now          func() time.Time // clock, for tests
}

const (
	defaultSegmentBytes = 64 << 20
	defaultDedupeWindow = 10 * time.Minute
	defaultDedupeMax    = 1_000_000
	maxGroupBytes       = 8 << 20
	readChunk           = 256 << 10
)

// Log is the embedded Store: segment files in a directory, or memory.
type Log struct {
	opts   Options
	log    *slog.Logger
	now    func() time.Time
	lock   *atomicfile.Lock
	reqs   chan *appendReq
	quit   chan struct{}
	done   chan struct{} // closed when the writer has stopped
	bg     sync.WaitGroup
	closed atomic.Bool
	pruneC chan struct{}
	// checked: every segment opened from its index file has had its records read once.
	checked  atomic.Bool
	fenceMu  sync.Mutex // one fence at a time
	refences int        // rebuildDedupe's retries after fencing, on open

	mu         sync.RWMutex
	segs       []*segment // oldest first; the last one takes appends
	low        uint64     // first retained sequence
	committed  uint64     // last committed sequence; 0: none
	headTS     int64      // timestamp of the last committed record
	changed    chan struct{}
	failed     error
	oldestC    cursor.Cursor // cache: cursor of record low; zero when unknown
	oldestAt   uint64        // low the cache was computed for
	damage     []Damage      // ranges lost to damage, in order; those below low are dropped
	unwritable error         // why the last append failed for a passing reason (a full disk); nil once one succeeds

	// writer-owned state
	wact    *segment // the segment taking appends
	wnext   uint64   // next sequence to assign
	wlastTS int64
	wsize   int64 // bytes written to the active segment
	wcount  uint64
	wbuf    []byte
	hwm     *mark // the high-water mark; nil in memory
	dedupe  *dedupe
	dropped int64

	// pruner-owned state
	lwm    *mark // the low-water mark; nil in memory
	lwmErr error // why the low-water mark did not move, when it did not

	appended, appendedBytes, duplicates atomic.Uint64
}

type appendReq struct {
	entries []Entry
	after   *appendReq // stored only if this one was (EnqueueAfter); nil: no condition
	res     []AppendResult
	err     error
	done    chan struct{}
}

// Open opens (creating if needed) the log in opts.Dir, or a new in-memory log. A torn or
// corrupt tail is truncated and reported through the logger.
func Open(opts Options) (*Log, error) {
	if opts.SegmentBytes <= 0 {
		opts.SegmentBytes = defaultSegmentBytes
	}
	if opts.DedupeWindow == 0 {
		opts.DedupeWindow = defaultDedupeWindow
	}
	if opts.DedupeMax <= 0 {
		opts.DedupeMax = defaultDedupeMax
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	l := &Log{
		opts:    opts,
		log:     opts.Logger,
		now:     opts.Now,
		reqs:    make(chan *appendReq, 1024),
		quit:    make(chan struct{}),
		done:    make(chan struct{}),
		pruneC:  make(chan struct{}, 1),
		changed: make(chan struct{}),
		dedupe:  newDedupe(opts.DedupeWindow, opts.DedupeMax),
	}
	if err := l.open(); err != nil {
		_ = l.hwm.close()
		_ = l.lwm.close()
		if l.lock != nil {
			_ = l.lock.Unlock()
		}
		return nil, err
	}
	// The active segment is taken before the pruner starts: it changes l.segs.
	l.wact = l.segs[len(l.segs)-1]
	l.bg.Add(2)
	go func() { defer l.bg.Done(); l.pruner() }()
	go func() { defer l.bg.Done(); l.check() }()
	go l.writer()
	return l, nil
}

func newMemSegment(base uint64, floorTS int64) *segment {
	m := &memFile{}
	_, _ = m.WriteAt(segHeader(base, floorTS), 0)
	s := &segment{base: base, floorTS: floorTS, f: m, start: segHeaderSize, size: segHeaderSize, lastTS: floorTS}
	s.refs.Store(1)
	return s
}

func segName(dir string, base uint64) string {
	return filepath.Join(dir, fmt.Sprintf("%020d.seg", base))
}

func createSegment(dir string, base uint64, floorTS int64) (*segment, error) {
	path := segName(dir, base)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	if _, err := f.WriteAt(segHeader(base, floorTS), 0); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, err
	}
	if err := atomicfile.SyncDir(dir); err != nil {
		f.Close()
		return nil, err
	}
	s := &segment{base: base, floorTS: floorTS, path: path, f: share(f), start: segHeaderSize, size: segHeaderSize, lastTS: floorTS}
	s.refs.Store(1)
	return s, nil
}

// Append implements Store.
func (l *Log) Append(ctx context.Context, entries []Entry) ([]AppendResult, error) {
	p, err := l.Enqueue(ctx, entries)
	if err != nil || p == nil {
		return nil, err
	}
	return p.Wait(ctx)
}

// Pending is an append that has its place in the log and waits to be written.
type Pending struct {
	l   *Log
	req *appendReq
	ext Queued // of another store, when l is nil
}

// Queued is an append another Store has given its place (see NewPending).
type Queued interface {
	// Done is closed once the append is written or has failed.
	Done() <-chan struct{}
	// Result is where each entry landed, as Append answers; only once Done is closed.
	Result() ([]AppendResult, error)
}

// NewPending is the Pending of an append another Store has queued.
func NewPending(q Queued) *Pending { return &Pending{ext: q} }

// Queued is what NewPending was given; nil for the log's own.
func (p *Pending) Queued() Queued { return p.ext }

// Enqueue gives entries their place in the log and returns without waiting for them to be
// written: they come after every append queued before Enqueue returned and before every
// one queued after. Wait tells how it went. Enqueue lets a caller queue the next append
// while the writer is still writing and syncing this one, and keep their order. Nil for no
// entries.
func (l *Log) Enqueue(ctx context.Context, entries []Entry) (*Pending, error) {
	return l.EnqueueAfter(ctx, entries, nil)
}

// ErrPredecessorNotStored is the error of an append queued with EnqueueAfter whose
// predecessor was not stored.
var ErrPredecessorNotStored = errors.New("eventlog: the append queued before this one was not stored, so this one is not either")

// EnqueueAfter is Enqueue for entries that must be stored only if prev (queued before them,
// by this log) is: when prev fails — a full disk fails the appends written with it and the
// log goes on once there is space — these fail too, with ErrPredecessorNotStored, rather
// than be stored after a gap. A nil prev sets no condition.
func (l *Log) EnqueueAfter(ctx context.Context, entries []Entry, prev *Pending) (*Pending, error) {
	if l.closed.Load() {
		return nil, ErrClosed
	}
	if len(entries) == 0 {
		return nil, nil
	}
	req := &appendReq{entries: entries, done: make(chan struct{})}
	if prev != nil {
		req.after = prev.req
	}
	select {
	case l.reqs <- req:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-l.quit:
		return nil, ErrClosed
	}
	return &Pending{l: l, req: req}, nil
}

// Wait waits until the entries are written (and synced, unless the log does not sync), and
// returns where each landed, as Append does.
func (p *Pending) Wait(ctx context.Context) ([]AppendResult, error) {
	if p == nil {
		return nil, nil
	}
	if p.ext != nil {
		select {
		case <-p.ext.Done():
			return p.ext.Result()
		case <-ctx.Done():
			// The append may still complete; a retry is answered from the dedupe window.
			return nil, ctx.Err()
		}
	}
	select {
	case <-p.req.done:
		return p.req.res, p.req.err
	case <-ctx.Done():
		// The append may still complete; a retry is answered from the dedupe window.
		return nil, ctx.Err()
	case <-p.l.done:
		select {
		case <-p.req.done:
			return p.req.res, p.req.err
		default:
			return nil, ErrClosed
		}
	}
}

// writer is the only goroutine that writes segments. It takes every append waiting in the
// queue, writes them with one write and one fsync (group commit), then publishes them.
func (l *Log) writer() {
	defer close(l.done)
	var group []*appendReq
	for {
		var first *appendReq
		select {
		case first = <-l.reqs:
		case <-l.quit:
			// Drain what was queued before Close.
			select {
			case first = <-l.reqs:
			default:
				return
			}
		}
		group = append(group[:0], first)
		bytes := entriesSize(first.entries)
	drain:
		for bytes < maxGroupBytes {
			select {
			case r := <-l.reqs:
				group = append(group, r)
				bytes += entriesSize(r.entries)
			default:
				break drain
			}
		}
		l.commitGroup(group)
	}
}

func entriesSize(es []Entry) int {
	n := 0
	for i := range es {
		n += frameHeader + recHeader + len(es[i].Type) + len(es[i].JSON)
	}
	return n
}

func (l *Log) commitGroup(group []*appendReq) {
	l.mu.RLock()
	failed := l.failed
	l.mu.RUnlock()
	if failed != nil {
		for _, r := range group {
			r.err = failed
			close(r.done)
		}
		return
	}
	// An append whose predecessor (EnqueueAfter) failed is not stored. The predecessor was
	// queued first, so it was in an earlier group (its err is set, by this goroutine) or is
	// in this one (which is stored or fails whole).
	var kept []*appendReq // nil while every append of the group is kept
	for i, r := range group {
		after := r.after
		r.after = nil // checked: the chain of appends is not kept alive
		if after == nil || after.err == nil {
			if kept != nil {
				kept = append(kept, r)
			}
			continue
		}
		if kept == nil {
			kept = append(make([]*appendReq, 0, len(group)), group[:i]...)
		}
		r.err = ErrPredecessorNotStored
		close(r.done)
	}
	if kept != nil {
		if group = kept; len(group) == 0 {
			return
		}
	}
	if l.wcount > 0 && l.wsize+int64(groupSize(group)) > l.opts.SegmentBytes {
		if err := l.roll(l.wact); err != nil {
			l.writeFailed(group, err)
			return
		}
	}
	act := l.wact
	now := l.now().UnixNano()
	buf := l.wbuf[:0]
	off := l.wsize
	var newIndex []indexEntry
	startSeq, startTS, startCount := l.wnext, l.wlastTS, l.wcount
	nrec := 0
	lastFrameStart := -1
	// Each key goes into the dedupe window at once, so that a repeat later in the group is
	// answered from it; the keys are taken out again if the group is not stored.
	var added []addedKey
	for _, r := range group {
		r.res = make([]AppendResult, len(r.entries))
		for i, e := range r.entries {
			k := makeKey(e.Source, e.ID)
			if c, ok := l.dedupe.lookup(k, now); ok {
				r.res[i] = AppendResult{Cursor: c, Duplicate: true}
				continue
			}
			ts := max(now, l.wlastTS)
			seq := l.wnext
			if l.wcount%blockRecords == 0 {
				newIndex = append(newIndex, indexEntry{ts: ts, off: uint32(off + int64(len(buf)))})
			}
			lastFrameStart = len(buf)
			buf = appendFrame(buf, ts, seq, k, 0, e.Type, e.JSON)
			c := cursor.New(ts, seq, cursor.NodeWidth)
			l.dedupe.add(k, c, ts)
			added = append(added, addedKey{k, seq})
			r.res[i] = AppendResult{Cursor: c}
			l.wnext++
			l.wcount++
			l.wlastTS = ts
			nrec++
		}
	}
	if nrec > 0 {
		// Mark the end of this append: a tail without the mark is cut off on open. The
		// flag is inside the checksummed payload, so the frame's checksum is redone.
		setCommitFlag(buf[lastFrameStart:])
		_, err := act.f.WriteAt(buf, off)
		if err == nil && l.opts.Sync == SyncAlways {
			err = act.f.Sync()
		}
		if err == nil && l.hwm != nil {
			// Only now that the records are durable, and before they are acknowledged.
			err = l.hwm.set(l.wnext-1, l.wlastTS, l.opts.Sync == SyncAlways)
		}
		if err != nil {
			// Undo: the group is not stored; the file goes back to where it was (the mark
			// has put itself back).
			for _, a := range added {
				l.dedupe.remove(a.k, a.seq)
			}
			l.wnext, l.wlastTS, l.wcount = startSeq, startTS, startCount
			if terr := act.f.Truncate(off); terr != nil {
				err = fmt.Errorf("%w; undoing the write: %v", err, terr)
			}
			l.writeFailed(group, err)
			return
		}
		l.wsize += int64(len(buf))
		l.appended.Add(uint64(nrec))
		l.appendedBytes.Add(uint64(len(buf)))
	}
	if cap(buf) <= 2*maxGroupBytes {
		l.wbuf = buf
	}
	dups := 0
	for _, r := range group {
		for _, res := range r.res {
			if res.Duplicate {
				dups++
			}
		}
	}
	l.duplicates.Add(uint64(dups))

	l.mu.Lock()
	if l.unwritable != nil {
		l.log.Info("eventlog: appends succeed again")
		l.unwritable = nil
	}
	if nrec > 0 {
		act.size = l.wsize
		act.count = l.wcount
		act.lastTS = l.wlastTS
		act.index = append(act.index, newIndex...)
		l.committed = l.wnext - 1
		l.headTS = l.wlastTS
		l.applyCaps()
		close(l.changed)
		l.changed = make(chan struct{})
	}
	l.mu.Unlock()
	for _, r := range group {
		close(r.done)
	}
}

// writeFailed answers a group whose write failed. A full disk (or quota) is a passing
// state: the group is refused as unavailable, the log stays open, and the next append tries
// again — appends resume by themselves once space is free. Any other error fails the log
// until it is reopened: what the disk holds after it is not known.
// addedKey is a key commitGroup added to the dedupe window, for the record of seq.
type addedKey struct {
	k   key
	seq uint64
}

func (l *Log) writeFailed(group []*appendReq, err error) {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		err = fmt.Errorf("%w: the disk is full: %v", ErrUnavailable, err)
		l.mu.Lock()
		first := l.unwritable == nil
		l.unwritable = err
		l.mu.Unlock()
		if first {
			l.log.Error("eventlog: the disk is full; appends are refused until space is free, and resume by themselves then", "err", err)
		}
		for _, r := range group {
			r.res, r.err = nil, err
			close(r.done)
		}
		return
	}
	l.fail(group, err)
}

func groupSize(group []*appendReq) int {
	n := 0
	for _, r := range group {
		n += entriesSize(r.entries)
	}
	return n
}

// setCommitFlag marks a frame as the last of its append: the flags byte of its payload,
// then the frame's checksum again.
func setCommitFlag(frame []byte) {
	frame[frameHeader+atFlags] |= flagCommit
	n := int(binary.LittleEndian.Uint32(frame))
	binary.LittleEndian.PutUint32(frame[4:], atomicfile.CRC32C(frame[frameHeader:frameHeader+n]))
}

func (l *Log) fail(group []*appendReq, err error) {
	err = fmt.Errorf("%w: %v", ErrFailed, err)
	l.log.Error("eventlog: write failed; appends are refused until the node restarts", "err", err)
	l.mu.Lock()
	l.failed = err
	l.mu.Unlock()
	for _, r := range group {
		r.res, r.err = nil, err
		close(r.done)
	}
}

// roll seals the active segment and starts the next one.
func (l *Log) roll(act *segment) error {
	if l.opts.Dir == "" {
		s := newMemSegment(l.wnext, l.wlastTS)
		l.mu.Lock()
		l.segs = append(l.segs, s)
		l.mu.Unlock()
		l.wact = s
	} else {
		if l.opts.Sync != SyncAlways {
			if err := act.f.Sync(); err != nil {
				return err
			}
		}
		l.mu.RLock()
		sealed := &segment{base: act.base, path: act.path, count: act.count, lastTS: act.lastTS, size: act.size, index: act.index}
		l.mu.RUnlock()
		if err := writeIndexFile(sealed); err != nil {
			return err
		}
		s, err := createSegment(l.opts.Dir, l.wnext, l.wlastTS)
		if err != nil {
			return err
		}
		l.mu.Lock()
		l.segs = append(l.segs, s)
		l.mu.Unlock()
		l.wact = s
	}
	l.wsize, l.wcount = segHeaderSize, 0
	return nil
}

// wactLocked is the segment taking appends; l.mu must be held.
func (l *Log) wactLocked() *segment {
	if len(l.segs) == 0 {
		return nil
	}
	return l.segs[len(l.segs)-1]
}

// Changed implements Store.
func (l *Log) Changed() <-chan struct{} {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.changed
}

// Stats implements Store.
func (l *Log) Stats() Stats {
	l.mu.RLock()
	st := Stats{
		Segments:      len(l.segs),
		DroppedOnOpen: l.dropped,
		Checked:       l.checked.Load(),
	}
	if l.committed >= l.low {
		st.Items = l.committed - l.low + 1
	}
	for _, d := range l.damage {
		if d.Last >= l.low {
			d.First = max(d.First, l.low)
			st.Damage = append(st.Damage, d)
			st.Lost += d.Count()
		}
	}
	st.Items -= min(st.Items, st.Lost)
	st.Bytes = uint64(l.retainedBytesLocked())
	st.Newest = l.newestLocked()
	l.mu.RUnlock()
	st.Oldest = l.oldest()
	st.Appended = l.appended.Load()
	st.AppendedBytes = l.appendedBytes.Load()
	st.Duplicates = l.duplicates.Load()
	st.DedupeEntries = l.dedupe.len()
	return st
}

// bytesBefore is the number of record bytes of s before the block holding seq low.
func bytesBefore(s *segment, low uint64) int64 {
	if low <= s.base || len(s.index) == 0 {
		return 0
	}
	b := int((low - s.base) / blockRecords)
	if b >= len(s.index) {
		return s.size - s.start
	}
	return int64(s.index[b].off) - s.start
}

// newestLocked is the cursor of the newest item ever committed. It stays set when retention
// has emptied the log, so that a client can still tell that events after its cursor existed
// (and were lost); only a log never written to has none.
func (l *Log) newestLocked() cursor.Cursor {
	if l.committed == 0 {
		return cursor.Cursor{}
	}
	return cursor.New(l.headTS, l.committed, cursor.NodeWidth)
}

// Unwritable reports why appends fail for now (a full disk), if they do; they resume by
// themselves once the cause is gone.
func (l *Log) Unwritable() error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.unwritable
}

// Failed reports the error that stopped appends, if any.
func (l *Log) Failed() error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.failed
}

// Close stops appends, finishes those queued, wakes every waiting reader and releases the
// data directory.
func (l *Log) Close() error {
	if l.closed.Swap(true) {
		return nil
	}
	close(l.quit)
	<-l.done
	l.bg.Wait()
	l.mu.Lock()
	close(l.changed) // wake readers; later Changed calls return a closed channel
	segs := l.segs
	l.segs = nil
	l.mu.Unlock()
	var err error
	for _, s := range segs {
		if ferr := s.f.Sync(); ferr != nil && err == nil {
			err = ferr
		}
		s.release()
	}
	if herr := l.hwm.close(); herr != nil && err == nil {
		err = herr
	}
	if lerr := l.lwm.close(); lerr != nil && err == nil {
		err = lerr
	}
	if l.lock != nil {
		if uerr := l.lock.Unlock(); err == nil {
			err = uerr
		}
	}
	return err
}
