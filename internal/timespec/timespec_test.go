package timespec

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Duration{
		"0": 0, "10m": 10 * time.Minute, "2h30m": 150 * time.Minute, "1.5h": 90 * time.Minute, "500ms": 500 * time.Millisecond,
		"2d": 48 * time.Hour, "1d12h": 36 * time.Hour, "1.5d": 36 * time.Hour, "1w": 168 * time.Hour, "1w2d3h4m5s": (168+48+3)*time.Hour + 4*time.Minute + 5*time.Second,
		"0d": 0, ".5d": 12 * time.Hour,
	} {
		if got, err := ParseDuration(in); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "d", "2", "-2d", "+2d", "2x", "1.d2", "2 d", "1d-2h", "..5d", "99999999d", "15260w", "106752d", "1e3h", "2dd"} {
		if got, err := ParseDuration(in); !errors.Is(err, ErrSyntax) {
			t.Errorf("ParseDuration(%q) = %v, %v; want ErrSyntax", in, got, err)
		}
	}
}

func TestParseTime(t *testing.T) {
	t.Parallel()
	zone := time.FixedZone("NPT", 5*3600+45*60)
	now := time.Date(2026, 11, 27, 16, 30, 0, 0, zone)
	for in, want := range map[string]time.Time{
		"2026-11-22T10:00:00Z":          time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC),
		"2026-11-22T10:00:00.5+01:00":   time.Date(2026, 11, 22, 9, 0, 0, 500e6, time.UTC),
		"2026-11-27 14:00":              time.Date(2026, 11, 27, 14, 0, 0, 0, zone),
		"2026-11-27T14:00":              time.Date(2026, 11, 27, 14, 0, 0, 0, zone),
		"2026-11-27 14:00:05.123456789": time.Date(2026, 11, 27, 14, 0, 5, 123456789, zone),
		"2026-02-03":                    time.Date(2026, 2, 3, 0, 0, 0, 0, zone),
		"14:00":                         time.Date(2026, 11, 27, 14, 0, 0, 0, zone),
		"23:59:59.5":                    time.Date(2026, 11, 27, 23, 59, 59, 500e6, zone),
		"0:00":                          time.Date(2026, 11, 27, 0, 0, 0, 0, zone),
	} {
		if got, err := ParseTime(in, now); err != nil || !got.Equal(want) {
			t.Errorf("ParseTime(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "yesterday", "24:00", "14:60", "14", "2026-11-31", "2026-11-27 14", "14:00 ", "10m"} {
		if got, err := ParseTime(in, now); !errors.Is(err, ErrSyntax) {
			t.Errorf("ParseTime(%q) = %v, %v; want ErrSyntax", in, got, err)
		}
	}
}

// A time of day is today's as the date is in the clock's zone, not in UTC.
func TestParseTimeOfDayZone(t *testing.T) {
	t.Parallel()
	east := time.FixedZone("E", 10*3600)
	now := time.Date(2026, 11, 28, 1, 0, 0, 0, east) // 2026-11-27 15:00 UTC
	got, err := ParseTime("00:30", now)
	if want := time.Date(2026, 11, 28, 0, 30, 0, 0, east); err != nil || !got.Equal(want) {
		t.Fatalf("ParseTime(00:30) = %v, %v; want %v", got, err, want)
	}
}

func TestParse(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 27, 16, 30, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		" 2d ":                 now.Add(-48 * time.Hour),
		"10m":                  now.Add(-10 * time.Minute),
		"16:00":                now.Add(-30 * time.Minute),
		"2026-11-27T16:29:00Z": now.Add(-time.Minute),
	} {
		if got, err := Parse(in, now); err != nil || !got.Equal(want) {
			t.Errorf("Parse(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := Parse("soon", now); !errors.Is(err, ErrSyntax) {
		t.Errorf("Parse(soon): %v", err)
	}
}

// ParseDuration agrees with time.ParseDuration on everything that takes (but signs, which
// it refuses), and reads back what Duration.String writes; ParseTime reads back an RFC 3339
// time it returned. Nothing panics.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"0", "10m", "2d", "1.5d", "1w2d3h", "2026-11-27 14:00", "14:00", "2026-11-22T10:00:00Z", "-5m", "1e9d", ".d", "9223372036s"} {
		f.Add(s)
	}
	now := time.Date(2026, 11, 27, 16, 30, 0, 0, time.FixedZone("X", -3*3600-1800))
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err == nil {
			if d < 0 {
				t.Fatalf("ParseDuration(%q) = %v, negative", s, d)
			}
			if back, err := ParseDuration(d.String()); err != nil || back != d {
				t.Fatalf("ParseDuration(%q) = %v, which reads back as %v, %v", s, d, back, err)
			}
		}
		if !strings.ContainsAny(s, "dw+-") {
			if want, werr := time.ParseDuration(s); (werr == nil) != (err == nil) || want != d {
				t.Fatalf("ParseDuration(%q) = %v, %v; time.ParseDuration: %v, %v", s, d, err, want, werr)
			}
		}
		tm, err := ParseTime(s, now)
		if err == nil {
			if back, err := ParseTime(tm.Format(time.RFC3339Nano), now); err != nil || !back.Equal(tm) {
				t.Fatalf("ParseTime(%q) = %v, which reads back as %v, %v", s, tm, back, err)
			}
		}
		if p, err := Parse(s, now); err == nil && p.After(now) && d > 0 {
			t.Fatalf("Parse(%q) = %v: a duration back from now after now", s, p)
		}
	})
}
