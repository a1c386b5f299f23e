package render

import (
	"bytes"
	"slices"
	"testing"

	"github.com/evtctl/evtctl/pkg/client"
)

// Items writes what Item writes for each item, also when items lie one after another in one
// buffer as lines (some needing compacting) and when they do not.
func TestItemsAsItem(t *testing.T) {
	lines := []string{
		`{"cursor":"1","event":"a","data":{"x":1}}`,
		`{"cursor":"2","event":"a","data":{"x": 2}}`,
		`{"cursor":"3","event":"a","data":"a b"}`,
		`{"cursor":"4","event":"a","data":{"t":"\t"}}`,
		`{"cursor":"5","event":"a","data":null}`,
	}
	var buf []byte
	var items []client.Item
	for _, l := range lines {
		start := len(buf)
		buf = append(buf, l...)
		buf = append(buf, '\n')
		items = append(items, client.Item{Raw: buf[start : start+len(l) : len(buf)]})
	}
	for i := range items {
		items[i].Raw = buf[bytes.Index(buf, items[i].Raw):][:len(items[i].Raw)]
	}
	// The same items, apart.
	apart := make([]client.Item, len(items))
	for i, it := range items {
		apart[i] = client.Item{Raw: append([]byte(nil), it.Raw...)}
	}
	// The same items, those that are compact said to be (as a source that built them says).
	marked := slices.Clone(items)
	for i := range marked {
		marked[i].Compact = isCompact(string(marked[i].Raw))
	}
	for _, format := range []string{"jsonl", "ce"} {
		var want, got, got2 bytes.Buffer
		r1, _ := New(&want, Options{Format: format})
		for _, it := range items {
			if err := r1.Item(it); err != nil {
				t.Fatal(err)
			}
		}
		r1.Flush()
		r2, _ := New(&got, Options{Format: format})
		if err := r2.Items(items); err != nil {
			t.Fatal(err)
		}
		r2.Flush()
		r3, _ := New(&got2, Options{Format: format})
		if err := r3.Items(apart); err != nil {
			t.Fatal(err)
		}
		r3.Flush()
		var got3 bytes.Buffer
		r4, _ := New(&got3, Options{Format: format})
		if err := r4.Items(marked); err != nil {
			t.Fatal(err)
		}
		r4.Flush()
		if got.String() != want.String() || got2.String() != want.String() || got3.String() != want.String() {
			t.Errorf("%s: Items wrote\n%s\nand apart\n%s\nand marked compact\n%s\nItem\n%s", format, got.String(), got2.String(), got3.String(), want.String())
		}
	}
}
