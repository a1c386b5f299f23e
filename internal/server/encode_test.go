package server

import (
	"encoding/json"
	"testing"

	"github.com/evtctl/evtctl/internal/eventlog"
	"github.com/evtctl/evtctl/pkg/cursor"
)

// encodePage encodes a whole page, with no limit, as a read does.
func encodePage(p eventlog.Page, ascending bool) []byte {
	pw := newPageWriter(getPageBuf(0), int(^uint(0)>>1), true)
	pw.grow(pageSize(p))
	pw.add(p.Items)
	return pw.finish(pageEnd{more: p.More, oldest: p.Oldest, newest: p.Newest, resume: p.Resume, ascending: ascending})
}

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
	// A page writer and the page's buffer: the buffer is never copied to grow.
	if allocs := testing.AllocsPerRun(10, func() { encodePage(p, true) }); allocs > 2 {
		t.Fatalf("encodePage made %v allocations, want 2", allocs)
	}
}
