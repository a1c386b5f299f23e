// Package timespec reads the times and durations people type on a command line: Go's
// durations with days and weeks too, RFC 3339 times, and dates and times of day in the
// local time zone.
package timespec

import (
	"errors"
	"math"
	"strings"
	"time"
)

// ErrSyntax is the error for text that is none of the forms taken.
var ErrSyntax = errors.New("not a time or a duration")

// units beyond Go's, as multiples of an hour.
var longUnits = map[string]time.Duration{"d": 24, "w": 7 * 24}

// ParseDuration reads a duration as time.ParseDuration does (a sequence of numbers, each
// with a unit: 90s, 1h30m, 1.5h), with d (24 hours) and w (7 days) as units too: 2d, 1d12h,
// 1.5d, 1w. It takes no sign: a duration here is never negative.
func ParseDuration(s string) (time.Duration, error) {
	if s == "0" {
		return 0, nil
	}
	if s == "" {
		return 0, ErrSyntax
	}
	var total time.Duration
	for s != "" {
		i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
		if i <= 0 || !strings.ContainsAny(s[:i], "0123456789") {
			return 0, ErrSyntax
		}
		num, rest := s[:i], s[i:]
		j := strings.IndexFunc(rest, func(r rune) bool { return (r >= '0' && r <= '9') || r == '.' })
		if j < 0 {
			j = len(rest)
		}
		unit := rest[:j]
		s = rest[j:]
		var d time.Duration
		if mult, ok := longUnits[unit]; ok {
			h, err := time.ParseDuration(num + "h")
			if err != nil || h > math.MaxInt64/mult {
				return 0, ErrSyntax
			}
			d = h * mult
		} else {
			var err error
			if unit == "" || strings.ContainsAny(unit, "+-") {
				return 0, ErrSyntax
			}
			if d, err = time.ParseDuration(num + unit); err != nil {
				return 0, ErrSyntax
			}
		}
		if d > math.MaxInt64-total {
			return 0, ErrSyntax
		}
		total += d
	}
	return total, nil
}

// Local forms, read in the time zone of now.
var (
	dateTimeLayouts = []string{"2006-01-02 15:04:05", "2006-01-02T15:04:05", "2006-01-02 15:04", "2006-01-02T15:04"}
	dateLayout      = "2006-01-02"
	clockLayouts    = []string{"15:04:05", "15:04"}
)

// ParseTime reads a point in time: an RFC 3339 time (2026-11-22T10:00:00Z); a date and time
// of day without a zone (2026-11-27 14:00, 2026-11-27T14:00:05.5), in now's time zone; a
// date (2026-11-27), its midnight there; or a time of day (14:00, 9:05:30), today's, as
// the date is in now's time zone. Seconds, and fractions of them, are optional.
func ParseTime(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	loc := now.Location()
	for _, l := range dateTimeLayouts {
		if t, err := time.ParseInLocation(l, s, loc); err == nil {
			return t, nil
		}
	}
	if t, err := time.ParseInLocation(dateLayout, s, loc); err == nil {
		return t, nil
	}
	for _, l := range clockLayouts {
		if c, err := time.Parse(l, s); err == nil {
			y, m, d := now.Date()
			return time.Date(y, m, d, c.Hour(), c.Minute(), c.Second(), c.Nanosecond(), loc), nil
		}
	}
	return time.Time{}, ErrSyntax
}

// Parse reads a point in time as ParseTime does, or a duration back from now as
// ParseDuration does (10m, 2d: that long before now). Space around s is ignored.
func Parse(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if t, err := ParseTime(s, now); err == nil {
		return t, nil
	}
	d, err := ParseDuration(s)
	if err != nil {
		return time.Time{}, ErrSyntax
	}
	return now.Add(-d), nil
}
