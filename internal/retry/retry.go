// Package retry holds the retry timing shared by the client and by event delivery:
// capped exponential backoff with jitter, and the Retry-After header.
package retry

import (
	"context"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// MaxRetryAfter caps a server's Retry-After, so that a bad value cannot stall a client
// for days.
const MaxRetryAfter = time.Hour

// Delay is the wait before retry number attempt (0 for the first retry): initial·2^attempt,
// capped at max, with equal jitter (half fixed, half random) so that clients that failed
// together spread out.
func Delay(attempt int, initial, max time.Duration) time.Duration {
	d := max
	// Shifting only while the result stays under the cap cannot overflow.
	if n := min(attempt, 62); n >= 0 && initial <= max>>n {
		d = initial << n
	}
	return d/2 + rand.N(d/2+1)
}

// ParseRetryAfter reads a Retry-After value, seconds or an HTTP date, capped at
// MaxRetryAfter; ok is false when it is absent or not valid.
func ParseRetryAfter(v string, now time.Time) (d time.Duration, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseUint(v, 10, 64); err == nil {
		return min(time.Duration(min(s, uint64(MaxRetryAfter/time.Second)))*time.Second, MaxRetryAfter), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return min(max(t.Sub(now), 0), MaxRetryAfter), true
	}
	return 0, false
}

// Sleep waits for d, or until ctx ends; it returns ctx's error in that case, else nil.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
