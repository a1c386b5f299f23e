package retry

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"
)

func TestDelay(t *testing.T) {
	for attempt := 0; attempt < 100; attempt++ {
		want := min(200*time.Millisecond<<min(attempt, 20), 15*time.Second)
		for range 20 {
			d := Delay(attempt, 200*time.Millisecond, 15*time.Second)
			if d < want/2 || d > want {
				t.Fatalf("attempt %d: delay %v outside [%v, %v]", attempt, d, want/2, want)
			}
		}
	}
	if d := Delay(40, time.Duration(1<<34+1), time.Minute); d < 30*time.Second {
		t.Fatalf("a large initial delay overflowed: %v", d)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"", 0, false},
		{"2", 2 * time.Second, true},
		{" 0 ", 0, true},
		{"-1", 0, false},
		{"abc", 0, false},
		{"99999999999", MaxRetryAfter, true},
		{"18446744073709551615", MaxRetryAfter, true},
		{"99999999999999999999", 0, false},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0, true},
		{now.Add(48 * time.Hour).Format(http.TimeFormat), MaxRetryAfter, true},
	} {
		d, ok := ParseRetryAfter(tc.in, now)
		if d != tc.want || ok != tc.ok {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tc.in, d, ok, tc.want, tc.ok)
		}
	}
}

func TestSleep(t *testing.T) {
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("Sleep: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep after cancel = %v, want context.Canceled", err)
	}
}
