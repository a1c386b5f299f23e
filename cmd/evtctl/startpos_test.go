package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/evtctl/evtctl/pkg/client"
)

// --since, --from and --to take durations with days, and times in the local zone as well as
// RFC 3339 ones; the local zone is the clock's (now's).
func TestStartTimes(t *testing.T) {
	t.Parallel()
	kathmandu := time.FixedZone("NPT", 5*3600+45*60)
	now := time.Date(2026, 11, 27, 16, 30, 0, 0, kathmandu)
	for _, tc := range []struct {
		in   string
		want time.Time
	}{
		{"10m", now.Add(-10 * time.Minute)},
		{"2d", now.Add(-48 * time.Hour)},
		{"1d12h", now.Add(-36 * time.Hour)},
		{"1.5d", now.Add(-36 * time.Hour)},
		{"1w", now.Add(-7 * 24 * time.Hour)},
		{"2026-11-22T10:00:00Z", time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)},
		{"2026-11-27 14:00", time.Date(2026, 11, 27, 14, 0, 0, 0, kathmandu)},
		{"2026-11-27T14:00:05", time.Date(2026, 11, 27, 14, 0, 5, 0, kathmandu)},
		{"2026-11-27 14:00:05.25", time.Date(2026, 11, 27, 14, 0, 5, 250e6, kathmandu)},
		{"2026-11-20", time.Date(2026, 11, 20, 0, 0, 0, 0, kathmandu)},
		{"14:00", time.Date(2026, 11, 27, 14, 0, 0, 0, kathmandu)},
		{" 9:05:30 ", time.Date(2026, 11, 27, 9, 5, 30, 0, kathmandu)},
	} {
		got, err := parseSince(tc.in, now)
		if err != nil || !got.Equal(tc.want) {
			t.Errorf("--since %q = %v, %v; want %v", tc.in, got, err, tc.want)
		}
		p, err := parsePosition("--from", tc.in, now, posCursor|posFile|posTime)
		if err != nil || !p.Time.Equal(tc.want) || p.Cursor != "" {
			t.Errorf("--from %q = %+v, %v; want %v", tc.in, p, err, tc.want)
		}
	}
}

// What does not parse is a usage error that names the flag, the value and every form taken.
func TestStartTimeErrors(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 27, 16, 30, 0, 0, time.UTC)
	for _, in := range []string{"yesterday", "2x", "-2d", "2026-11-27 25:00", "2026-13-01", "14:60", "d", "1.d2", "99999999d", "2026-11-27 14"} {
		_, err := parseSince(in, now)
		var ue *usageError
		if !errors.As(err, &ue) {
			t.Errorf("--since %q: %v, want a usage error", in, err)
			continue
		}
		for _, want := range []string{`--since "` + in + `"`, "10m", "2d", "RFC 3339", "2026-11-27 14:00", "14:00"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("--since %q: %q does not name %q", in, err, want)
			}
		}
		if _, err := parsePosition("--to", in, now, posCursor|posFile|posTime); !errors.As(err, &ue) || !strings.Contains(err.Error(), "2d") {
			t.Errorf("--to %q: %v, want a usage error naming the forms", in, err)
		}
	}
}

// A cursor is still a cursor, and a cursor or checkpoint given to --since is pointed at the
// flag that takes it.
func TestStartCursorNotTime(t *testing.T) {
	t.Parallel()
	const cur = "18ea6461241d1dcb-0000000000000001"
	p, err := parsePosition("--from", cur, time.Now(), posCursor|posFile|posTime)
	if err != nil || p.Position != (client.Position{Cursor: cur}) || p.Oldest {
		t.Fatalf("--from %s = %+v, %v", cur, p, err)
	}
	if _, err := parseSince(cur, time.Now()); err == nil || !strings.Contains(err.Error(), "goes to --after") {
		t.Fatalf("--since CURSOR: %v", err)
	}
}
