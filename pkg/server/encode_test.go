package server

import (
	"encoding/json"
	"testing"

	"github.com/evtctl/evtctl/pkg/cursor"
	"github.com/evtctl/evtctl/pkg/eventlog"
)

// TestEncodePageSizesItsBuffer guards the estimate that keeps a page from being copied
// into a larger buffer while it is encoded.
func TestEncodePageSizesItsBuffer(t *testing.T) {
	var p eventlog.Page
	for i := 0; i < 1000; i++ {
		p.Items = append(p.Items, eventlog.Item{
			Cursor: cursor.New(int64(1e18)+int64(i), uint64(i), 0),
			Type:   "org.openedx.learning.course.enrollment.created.v1",
			JSON:   []byte(`{"specversion":"1.0","id":"x","source":"/s","type":"t"}`),
		})
	}
	p.Oldest, p.Newest = p.Items[0].Cursor, p.Items[999].Cursor
	b := encodePage(p, true)
	if !json.Valid(b) {
		t.Fatal("page is not valid JSON")
	}
	if allocs := testing.AllocsPerRun(10, func() { encodePage(p, true) }); allocs > 1 {
		t.Fatalf("encodePage made %v allocations, want 1", allocs)
	}
}
