package eventlog

import (
	"encoding/binary"
	"hash/fnv"
	"sync/atomic"
	"time"

	"github.com/evtctl/evtctl/pkg/cursor"
)

// dedupe remembers recent (source, id) keys in two generations of maps: keys move to the
// old generation when a new one starts and are forgotten one generation later, so a key is
// remembered for at least the window (unless the count limit forces an early turn) with no
// per-key expiry queue. Only the writer goroutine mutates it.
//
// Almost every key looked up is new, and with a million keys remembered a miss in each map
// costs cache and TLB misses (a fifth of the node's CPU in a batch ingest). So each map has a
// bit table in front of it, indexed by bits of the key and set for every key the map got:
// a clear bit is a certain miss. Bits are not cleared by remove (another key may share
// one); a set bit only means the map is asked.
type dedupe struct {
	window   int64 // nanoseconds; < 0 disables
	max      int
	n        atomic.Int64 // len(cur)+len(prev), for Stats from other goroutines
	cur      map[key]dedupeVal
	prev     map[key]dedupeVal
	curBits  bitTable
	prevBits bitTable
	shift    uint // 64 - log2 of the tables' bits
	curStart int64
}

// bitTable is a table of bits, one uint64 per 64.
type bitTable []uint64

func (b bitTable) has(i uint64) bool { return b[i>>6]&(1<<(i&63)) != 0 }
func (b bitTable) set(i uint64)      { b[i>>6] |= 1 << (i & 63) }

// slot is k's bit in the tables: the top bits of a multiplicative hash of part of the key
// (the key is already a hash, but its low bits need not be well mixed).
func (d *dedupe) slot(k key) uint64 {
	return (binary.LittleEndian.Uint64(k[:8]) * 0x9e3779b97f4a7c15) >> d.shift
}

type dedupeVal struct {
	ts  int64
	seq uint64
}

func newDedupe(window time.Duration, max int) *dedupe {
	d := &dedupe{window: int64(window), max: max, cur: map[key]dedupeVal{}}
	if window < 0 {
		return d
	}
	// 16 bits for each key a map holds at most (max/2): a new key finds its bit set in
	// about one table in sixteen. 4 Ki bits at least, 256 Mi bits (32 MiB) at most.
	logBits := uint(12)
	for logBits < 28 && 1<<logBits < 8*max {
		logBits++
	}
	d.shift = 64 - logBits
	d.curBits = make(bitTable, 1<<logBits/64)
	d.prevBits = make(bitTable, 1<<logBits/64)
	return d
}

func makeKey(source, id string) key {
	h := fnv.New128a()
	var n [binary.MaxVarintLen64]byte
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(source)))])
	h.Write([]byte(source))
	h.Write([]byte(id))
	var k key
	h.Sum(k[:0])
	return k
}

func (d *dedupe) lookup(k key, now int64) (cursor.Cursor, bool) {
	if d.window < 0 {
		return cursor.Cursor{}, false
	}
	var v dedupeVal
	ok := false
	i := d.slot(k)
	if d.curBits.has(i) {
		v, ok = d.cur[k]
	}
	if !ok && d.prevBits.has(i) {
		v, ok = d.prev[k]
	}
	if !ok || v.ts < now-d.window {
		return cursor.Cursor{}, false
	}
	return cursor.New(v.ts, v.seq, cursor.NodeWidth), true
}

func (d *dedupe) add(k key, c cursor.Cursor, ts int64) {
	if d.window < 0 {
		return
	}
	if ts-d.curStart >= d.window || len(d.cur) >= d.max/2 {
		d.prev, d.cur = d.cur, make(map[key]dedupeVal, len(d.cur))
		d.prevBits, d.curBits = d.curBits, d.prevBits
		clear(d.curBits)
		d.curStart = ts
	}
	d.cur[k] = dedupeVal{ts: c.TS, seq: c.Seq}
	d.curBits.set(d.slot(k))
	d.n.Store(int64(len(d.cur) + len(d.prev)))
}

// remove takes out the key of the record seq, which was not stored after all.
func (d *dedupe) remove(k key, seq uint64) {
	if v, ok := d.cur[k]; ok && v.seq == seq {
		delete(d.cur, k)
	}
	if v, ok := d.prev[k]; ok && v.seq == seq {
		delete(d.prev, k)
	}
	d.n.Store(int64(len(d.cur) + len(d.prev)))
}

func (d *dedupe) len() int { return int(d.n.Load()) }
