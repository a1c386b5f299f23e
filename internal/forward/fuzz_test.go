package forward

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// FuzzParseDelays checks that ParseDelays never panics, and that what it accepts is a valid
// tier list that formats and parses back to itself.
func FuzzParseDelays(f *testing.F) {
	for _, s := range []string{"10s,1m,10m,1h", "1s", " 1ms , 2ms", "", ",", "1m,10s", "0s", "-1h", "1e9h", "9223372036s", "1.5h,2h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ds, err := ParseDelays(s)
		if err != nil {
			return
		}
		if len(ds) == 0 || len(ds) > MaxTiers {
			t.Fatalf("%q: %d tiers", s, len(ds))
		}
		for i, d := range ds {
			if d <= 0 || d > MaxDelay || (i > 0 && d < ds[i-1]) {
				t.Fatalf("%q: bad delays %v", s, ds)
			}
		}
		again, err := ParseDelays(FormatDelays(ds))
		if err != nil || len(again) != len(ds) {
			t.Fatalf("%q: FormatDelays gave %q: %v", s, FormatDelays(ds), err)
		}
		for i := range ds {
			if again[i] != ds[i] {
				t.Fatalf("%q: round trip %v != %v", s, again, ds)
			}
		}
	})
}

// FuzzParseHeader checks that ParseHeader never panics and that what it accepts is safe to
// put in a request: a token name that is not reserved, a value without line breaks.
func FuzzParseHeader(f *testing.F) {
	for _, s := range []string{"X-A: b", "Authorization: Bearer t", ":", "a:b:c", "ce-id: 1", "X: \r\nInjected: 1", "Host: x", "  : ", "X-\u00e9: v"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		name, value, err := ParseHeader(s)
		if err != nil {
			return
		}
		if name == "" || strings.ContainsAny(name, " \t\r\n:") || strings.ContainsAny(value, "\r\n\x00") {
			t.Fatalf("%q: accepted %q: %q", s, name, value)
		}
		l := strings.ToLower(name)
		if reservedHeaders[l] || strings.HasPrefix(l, "ce-") || strings.HasPrefix(l, "webhook-") {
			t.Fatalf("%q: accepted the reserved %q", s, name)
		}
		if value != strings.TrimSpace(value) {
			t.Fatalf("%q: value %q not trimmed", s, value)
		}
	})
}

// FuzzDecodeJournal checks that decoding any bytes never panics, that the valid prefix it
// reports decodes to the same state, and that a journal written by appendRecord decodes whole.
func FuzzDecodeJournal(f *testing.F) {
	good, _ := appendRecord([]byte(journalHeader), &record{Op: opRetry, Cursor: cursorOf(1), Tier: 1, Attempts: 1,
		Due: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Status: 503, Reason: "busy", Event: json.RawMessage(`{"id":"a"}`)})
	good, _ = appendRecord(good, &record{Op: opDone, Cursor: cursorOf(2)})
	f.Add(good)
	f.Add(good[:len(good)-5])
	f.Add([]byte(journalHeader))
	f.Add([]byte(journalHeader[:7]))
	f.Add([]byte("garbage"))
	f.Add(append([]byte(journalHeader), "00000000 {}\n"...))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, valid, err := decodeJournal(data)
		if err != nil {
			return
		}
		if valid < 0 || valid > len(data) {
			t.Fatalf("valid %d of %d", valid, len(data))
		}
		st2, valid2, err := decodeJournal(data[:valid])
		if err != nil || valid2 != valid || len(st2.live) != len(st.live) || len(st2.done) != len(st.done) {
			t.Fatalf("the valid prefix decodes differently: %v, %d != %d", err, valid2, valid)
		}
		for c, e := range st.live {
			if e.Event == nil || e.Cursor != c || !bytes.HasPrefix(bytes.TrimSpace(e.Event), []byte("{")) {
				t.Fatalf("entry %+v", e)
			}
		}
		// Writing the state out again and reading it back gives the same state.
		out := []byte(journalHeader)
		for _, e := range st.live {
			out, err = appendRecord(out, &record{Op: opRetry, Cursor: e.Cursor, Tier: e.Tier, Attempts: e.Attempts, Due: e.Due, Status: e.Status, Reason: e.Reason, Event: e.Event})
			if err != nil {
				t.Fatal(err)
			}
		}
		for c := range st.done {
			out, _ = appendRecord(out, &record{Op: opDone, Cursor: c})
		}
		st3, valid3, err := decodeJournal(out)
		if err != nil || valid3 != len(out) || len(st3.live) != len(st.live) || len(st3.done) != len(st.done) {
			t.Fatalf("re-encoded state: %v, %d of %d valid", err, valid3, len(out))
		}
	})
}

// FuzzParseSecret checks that ParseSecret never panics and that an accepted secret gives a
// key that encodes back to it.
func FuzzParseSecret(f *testing.F) {
	for _, s := range []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_", "", "abc", "whsec_====", " whsec_AAAA "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		key, err := ParseSecret(s)
		if err != nil {
			return
		}
		if len(key) == 0 {
			t.Fatalf("%q: an empty key", s)
		}
		if got := base64.StdEncoding.EncodeToString(key); got != strings.TrimPrefix(strings.TrimSpace(s), SecretPrefix) {
			t.Fatalf("%q: key encodes to %q", s, got)
		}
	})
}
