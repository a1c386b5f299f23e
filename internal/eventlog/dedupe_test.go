package eventlog

import (
	"fmt"
	"testing"
	"time"

	"github.com/evtctl/evtctl/pkg/cursor"
)

// The bit tables in front of the maps never hide a key: with tables small enough that keys
// share bits, every key added is found, through turns of the generations, until it is
// forgotten two generations later or removed; a removed key does not hide another that
// shares its bit.
func TestDedupeTablesHideNoKey(t *testing.T) {
	d := newDedupe(time.Hour, 64) // tables of 4 Ki bits: 512 keys share them heavily
	if len(d.curBits)*64 != 1<<12 {
		t.Fatalf("tables of %d bits, want 4096", len(d.curBits)*64)
	}
	const n = 512
	keys := make([]key, n)
	for i := range keys {
		keys[i] = makeKey("/src", fmt.Sprint("e-", i))
	}
	at := func(i int) int64 { return int64(1000 + i) }
	gen := func(i int) int { return i / 32 } // max/2 keys a generation
	for i, k := range keys {
		d.add(k, cursor.New(at(i), uint64(i+1), cursor.NodeWidth), at(i))
		for j := 0; j <= i; j++ {
			c, ok := d.lookup(keys[j], at(i))
			want := gen(i)-gen(j) <= 1 // in the current or the previous generation
			if ok != want || ok && c.Seq != uint64(j+1) {
				t.Fatalf("after adding %d: key %d found %v (cursor %v), want %v", i, j, ok, c, want)
			}
		}
	}
	// Remove one key of the current generation: it is gone, the others stay.
	last := n - 1
	d.remove(keys[last], uint64(last+1))
	if _, ok := d.lookup(keys[last], at(last)); ok {
		t.Fatal("a removed key is still found")
	}
	for j := last - 1; gen(j) == gen(last); j-- {
		if _, ok := d.lookup(keys[j], at(last)); !ok {
			t.Fatalf("key %d lost when key %d was removed", j, last)
		}
	}
	// A new key whose bit is set by others is still a miss.
	fresh := makeKey("/src", "never-added")
	if _, ok := d.lookup(fresh, at(last)); ok {
		t.Fatal("a key never added was found")
	}
}

// With the window off, nothing is remembered and no tables are made.
func TestDedupeOff(t *testing.T) {
	d := newDedupe(-1, 1000)
	k := makeKey("/s", "1")
	d.add(k, cursor.New(1, 1, cursor.NodeWidth), 1)
	if _, ok := d.lookup(k, 1); ok || d.curBits != nil {
		t.Fatalf("found %v, tables %d", ok, len(d.curBits))
	}
}

// BenchmarkDedupeMiss is the lookup of a new key with a million keys remembered, the common
// case of an ingest.
func BenchmarkDedupeMiss(b *testing.B) {
	d := newDedupe(time.Hour, 1_000_000)
	for i := range 999_000 {
		d.add(makeKey("/bench", fmt.Sprint("old-", i)), cursor.New(int64(i+1), uint64(i+1), cursor.NodeWidth), int64(i+1))
	}
	fresh := make([]key, 1<<20) // more than the caches hold, as the ids of an ingest are
	for i := range fresh {
		fresh[i] = makeKey("/bench", fmt.Sprint("new-", i))
	}
	b.ResetTimer()
	for i := range b.N {
		if _, ok := d.lookup(fresh[i%len(fresh)], 1_000_000); ok {
			b.Fatal("found")
		}
	}
}
