package redisstream

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestParseID(t *testing.T) {
	for _, s := range []string{"0-0", "0-1", "1732269600000-0", "1732269600000-18446744073709551615", "18446744073709551615-18446744073709551615"} {
		id, err := ParseID(s)
		if err != nil || id.String() != s {
			t.Errorf("%s: %v, %v", s, id, err)
		}
	}
	for _, s := range []string{"", "-", "+", "$", "1", "1-", "-1", "01-0", "1-01", "1-0-0", "1 -0", "+1-0", "1-x", "18446744073709551616-0", "1-18446744073709551616"} {
		if _, err := ParseID(s); err == nil {
			t.Errorf("%q read as an id", s)
		}
	}
}

// TestCompareIsNumeric checks that positions order as Redis orders ids, which text order
// does not: 9 comes before 10.
func TestCompareIsNumeric(t *testing.T) {
	ordered := []string{"", "0-0", "0-9", "0-10", "9-0", "10-0", "1732269600000-2", "1732269600000-10", "1732269600001-0"}
	for i, a := range ordered {
		for j, b := range ordered {
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := compareText(a, b); got != want {
				t.Errorf("compare(%q, %q) = %d, want %d", a, b, got, want)
			}
		}
	}
}

func TestBeforeTime(t *testing.T) {
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	ms := uint64(at.UnixMilli())
	for _, c := range []struct {
		t    time.Time
		want ID
	}{
		{at, ID{ms - 1, math.MaxUint64}},                                 // entries of that very millisecond are at or after it
		{at.Add(time.Nanosecond), ID{ms, math.MaxUint64}},                // those of the millisecond it falls in are before it
		{at.Add(time.Millisecond - 1), ID{ms, math.MaxUint64}},           //
		{at.Add(time.Millisecond), ID{ms, math.MaxUint64}},               //
		{time.UnixMilli(1), ID{0, math.MaxUint64}},                       //
		{time.UnixMilli(1).Add(-time.Nanosecond), ID{0, math.MaxUint64}}, //
	} {
		got, ok := BeforeTime(c.t)
		if !ok || got != c.want {
			t.Errorf("%s: %v %v, want %v", c.t.Format(time.RFC3339Nano), got, ok, c.want)
		}
	}
	for _, tm := range []time.Time{time.Unix(0, 0), time.Unix(-5, 0), {}} {
		if got, ok := BeforeTime(tm); ok {
			t.Errorf("%s: %v, want the stream's start", tm, got)
		}
	}
}

func FuzzParseID(f *testing.F) {
	for _, s := range []string{"0-0", "1732269600000-3", "1-18446744073709551615", "01-1", "1--1", "99999999999999999999-0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseID(s)
		if err != nil {
			if !strings.Contains(err.Error(), "invalid Redis stream entry id") {
				t.Fatalf("error %v", err)
			}
			return
		}
		if id.String() != s {
			t.Fatalf("%q reads as %v", s, id)
		}
		if p, ok := id.Prev(); ok && (p.Compare(id) >= 0 || compareText(p.String(), s) >= 0) {
			t.Fatalf("%v comes before %v", p, id)
		}
	})
}
