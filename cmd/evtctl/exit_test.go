package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestExitCodes(t *testing.T) {
	t.Parallel()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		err  error
		code int
		msg  string
	}{
		{"ok", context.Background(), nil, 0, ""},
		{"error", context.Background(), errors.New("boom"), 1, "evtctl: boom\n"},
		{"usage", context.Background(), usagef("bad flag"), 2, "evtctl: bad flag\nRun 'evtctl --help' for usage.\n"},
		{"wrapped usage", context.Background(), fmt.Errorf("x: %w", usagef("bad")), 2, "evtctl: x: bad\n"},
		{"lost", context.Background(), &statusError{exitLost, errors.New("events were lost")}, 3, "evtctl: events were lost\n"},
		{"interrupted", cancelled, context.Canceled, 130, ""},
		{"cancel without signal is an error", context.Background(), context.Canceled, 1, "context canceled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _, _, errOut := testStreams()
			if got := exitCode(s, tc.err, tc.ctx); got != tc.code {
				t.Errorf("code = %d, want %d", got, tc.code)
			}
			if !strings.Contains(errOut.String(), tc.msg) || (tc.msg == "" && errOut.Len() != 0) {
				t.Errorf("stderr = %q, want %q", errOut.String(), tc.msg)
			}
		})
	}
}

func TestRunUsageErrorsExit2(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"serve", "--no-such-flag"},
		{"serve", "--memory", "--data-dir", "x"},
		{"serve", "--sync", "sometimes"},
		{"serve", "--max-bytes", "lots"},
		{"version", "extra"},
	} {
		if got := run(args); got != exitUsage {
			t.Errorf("evtctl %s: exit %d, want %d", strings.Join(args, " "), got, exitUsage)
		}
	}
}

func TestParseSize(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{"0": 0, "1048576": 1 << 20, "64MiB": 64 << 20, "1GiB": 1 << 30, "1GB": 1e9, "512k": 512 << 10, "1.5KiB": 1536} {
		got, err := parseSize(in)
		if err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "lots", "-1", "1XB"} {
		if _, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) accepted", in)
		}
	}
}

func TestSafeText(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"plain text":            "plain text",
		"two\nlines\ttab":       "two\nlines\ttab",
		"esc \x1b[31mred":       `esc \u001b[31mred`,
		"bidi \u202eevil":       `bidi \u202eevil`,
		"c1 \u009b":             `c1 \u009b`,
		"bell\a and nul\x00 ok": `bell\u0007 and nul\u0000 ok`,
	} {
		if got := safeText(in); got != want {
			t.Errorf("safeText(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestTargetURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"localhost:7480/signal/order-42":    "http://localhost:7480/signal/order-42",
		"https://hooks.example/in/?key=abc": "https://hooks.example/in/?key=abc",
		" http://127.0.0.1:8080/events ":    "http://127.0.0.1:8080/events",
	} {
		if got, err := targetURL(in); err != nil || got != want {
			t.Errorf("targetURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "ftp://x/y", "http://", "://x"} {
		if _, err := targetURL(bad); err == nil {
			t.Errorf("targetURL(%q) accepted", bad)
		}
	}
}
