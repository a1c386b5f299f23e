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
type dedupe struct {
	window   int64 // nanoseconds; < 0 disables
	max      int
	n        atomic.Int64 // len(cur)+len(prev), for Stats from other goroutines
	cur      map[key]dedupeVal
	prev     map[key]dedupeVal
	curStart int64
}

type dedupeVal struct {
	ts  int64
	seq uint64
}

func newDedupe(window time.Duration, max int) *dedupe {
	return &dedupe{window: int64(window), max: max, cur: map[key]dedupeVal{}}
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
	v, ok := d.cur[k]
	if !ok {
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
		d.curStart = ts
	}
	d.cur[k] = dedupeVal{ts: c.TS, seq: c.Seq}
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
