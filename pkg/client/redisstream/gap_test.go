package redisstream

import (
	"cmp"
	"strings"
	"testing"

	"github.com/evtctl/evtctl/pkg/client"
)

// snap is a stream's XINFO: ids are entries n-0 for n = 1, 2, …
func snap(length, added int64, first, last, lastGen, maxDel uint64) snapshot {
	s := snapshot{exists: true, length: length, added: added, lastGen: ID{Ms: lastGen}, maxDel: ID{Ms: maxDel}}
	if length > 0 {
		s.first, s.last = ID{Ms: first}, ID{Ms: last}
	}
	return s
}

func TestJudge(t *testing.T) {
	known := func(n int64) mark { return mark{added: n} }
	at := func(ms uint64) (string, ID) { id := ID{Ms: ms}; return id.String(), id }
	type want struct {
		kind   client.GapKind
		gap    bool
		lost   uint64
		detail string // part of it
	}
	cases := []struct {
		name   string
		pos    uint64 // 0: the start
		madeUp bool
		mk     mark
		s      snapshot
		n      int
		toEnd  bool
		want   want
	}{
		{name: "nothing removed", pos: 10, mk: unknownMark, s: snap(100, 100, 1, 100, 100, 0), n: 90, toEnd: true},
		{name: "trimmed before the cursor only", pos: 60, mk: known(60), s: snap(50, 100, 51, 100, 100, 0), n: 40, toEnd: true},
		{name: "the cursor's own entry trimmed, nothing after it", pos: 50, mk: known(50), s: snap(50, 100, 51, 100, 100, 0)},
		{name: "trimmed past the cursor, counted", pos: 50, mk: known(50), s: snap(10, 100, 91, 100, 100, 0),
			want: want{gap: true, lost: 40, detail: "the stream now starts at 91-0"}},
		{name: "trimmed past the cursor, not counted", pos: 50, mk: unknownMark, s: snap(10, 100, 91, 100, 100, 0),
			want: want{gap: true, detail: "evtctl cannot tell (90 entries were removed from it in all"}},
		{name: "the cursor's own entry trimmed, not counted: cannot tell", pos: 50, mk: unknownMark, s: snap(50, 100, 51, 100, 100, 0),
			want: want{gap: true, detail: "cannot tell"}},
		{name: "before the first entry, nothing ever removed", pos: 5, mk: unknownMark, s: snap(10, 10, 11, 20, 20, 0)},
		{name: "all trimmed", pos: 50, mk: unknownMark, s: snap(0, 100, 0, 0, 100, 0),
			want: want{gap: true, detail: "holds no entries now"}},
		{name: "all trimmed, counted", pos: 50, mk: known(50), s: snap(0, 100, 0, 0, 100, 0),
			want: want{gap: true, lost: 50, detail: "holds no entries now"}},
		{name: "deleted after the cursor", pos: 50, mk: unknownMark, s: snap(98, 100, 1, 100, 100, 70), n: 48, toEnd: true,
			want: want{gap: true, detail: "deleted (XDEL) after the cursor, the newest of them 70-0"}},
		{name: "deleted after the cursor, counted", pos: 50, mk: known(50), s: snap(98, 100, 1, 100, 100, 70), n: 48, toEnd: true,
			want: want{gap: true, lost: 2, detail: "the newest of them 70-0"}},
		{name: "deleted before the cursor", pos: 80, mk: known(80), s: snap(98, 100, 1, 100, 100, 70), n: 20, toEnd: true},
		{name: "a deletion reported already", pos: 50, mk: mark{added: -1, acked: ID{Ms: 70}}, s: snap(98, 100, 1, 100, 100, 70), n: 10},
		{name: "a deletion older than one reported, counted", pos: 50, mk: mark{added: 50, acked: ID{Ms: 70}}, s: snap(97, 100, 1, 100, 100, 70), n: 47, toEnd: true,
			want: want{gap: true, lost: 3, detail: "older than the newest deletion"}},
		{name: "from the start: trimming is no loss", pos: 0, mk: unknownMark, s: snap(10, 100, 91, 100, 100, 0), n: 10, toEnd: true},
		{name: "from the start: a deletion inside the stream", pos: 0, mk: unknownMark, s: snap(9, 100, 91, 100, 100, 95), n: 9, toEnd: true,
			want: want{gap: true, detail: "the newest of them 95-0"}},
		{name: "from the start: a deletion before its first entry", pos: 0, mk: unknownMark, s: snap(9, 100, 91, 100, 100, 60), n: 9, toEnd: true},
		{name: "from a time: trimming is no loss", pos: 50, madeUp: true, mk: unknownMark, s: snap(10, 100, 91, 100, 100, 0), n: 10},
		{name: "from a time: a deletion inside the stream", pos: 50, madeUp: true, mk: unknownMark, s: snap(9, 100, 91, 100, 100, 95), n: 9,
			want: want{gap: true, detail: "95-0"}},
		{name: "a stream that does not exist", pos: 5, mk: unknownMark, s: snapshot{},
			want: want{gap: true, kind: client.GapPastNewest, detail: "does not exist"}},
		{name: "from the start of a stream that does not exist", pos: 0, mk: unknownMark, s: snapshot{}},
		{name: "a cursor past every id", pos: 200, mk: unknownMark, s: snap(100, 100, 1, 100, 100, 0),
			want: want{gap: true, kind: client.GapPastNewest, detail: "newest id the stream ever gave is 100-0"}},
		{name: "created again: fewer added than counted", pos: 50, mk: known(500), s: snap(100, 100, 1, 100, 100, 0), n: 50, toEnd: true,
			want: want{gap: true, kind: client.GapRestarted, detail: "deleted and created again"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := judgeIn{madeUp: c.madeUp, mk: c.mk, snap: c.s, n: c.n, toEnd: c.toEnd, key: "s"}
			if c.pos > 0 {
				in.pos, in.p = at(c.pos)
			}
			v := judge(in)
			if (v.gap != nil) != c.want.gap {
				t.Fatalf("gap %+v, want one: %v", v.gap, c.want.gap)
			}
			if v.gap == nil {
				return
			}
			if v.gap.Kind != c.want.kind || v.gap.Lost != c.want.lost || !strings.Contains(v.gap.Detail, c.want.detail) {
				t.Fatalf("gap %+v, want %+v", *v.gap, c.want)
			}
			// A gap at the stream's start is after 0-0, the position before every entry.
			if wantAfter := cmp.Or(in.pos, "0-0"); v.gap.After != wantAfter {
				t.Fatalf("gap after %q, want %q", v.gap.After, wantAfter)
			}
		})
	}
}
