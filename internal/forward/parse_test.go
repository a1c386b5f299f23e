package forward

import (
	"bytes"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseDelays(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []time.Duration
		err  string
	}{
		{"10s,1m,10m,1h", []time.Duration{10 * time.Second, time.Minute, 10 * time.Minute, time.Hour}, ""},
		{" 250ms , 1s ", []time.Duration{250 * time.Millisecond, time.Second}, ""},
		{"1m,1m", []time.Duration{time.Minute, time.Minute}, ""},
		{"", nil, "no delays"},
		{"10s,,1m", nil, "delay 2 is empty"},
		{"10s,", nil, "delay 2 is empty"},
		{"10", nil, "not a duration"},
		{"0s", nil, "must be positive"},
		{"-1s", nil, "must be positive"},
		{"1m,10s", nil, "shorter than the one before"},
		{"721h", nil, "longer than"},
		{strings.Repeat("1s,", 32) + "1s", nil, "at most 32"},
	} {
		got, err := ParseDelays(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseDelays(%q) = %v, %v; want an error with %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("ParseDelays(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	if s := FormatDelays(DefaultDelays); s != "10s,1m,10m,1h" {
		t.Errorf("FormatDelays(DefaultDelays) = %q", s)
	}
}

func TestParseHeader(t *testing.T) {
	for _, tc := range []struct {
		in, name, value, err string
	}{
		{"Authorization: Bearer x", "Authorization", "Bearer x", ""},
		{"X-Empty:", "X-Empty", "", ""},
		{"  X-A :  b c  ", "X-A", "b c", ""},
		{"X-Url: http://a:b/c", "X-Url", "http://a:b/c", ""},
		{"no colon", "", "", "want 'Name: value'"},
		{": v", "", "", "name is empty"},
		{"Bad Name: v", "", "", "not a valid header name"},
		{"Content-Type: text/plain", "", "", "sets Content-Type itself"},
		{"host: x", "", "", "itself"},
		{"ce-id: 1", "", "", "ce- headers"},
		{"Webhook-Signature: v1,x", "", "", "signature"},
		{"X-A: a\x00b", "", "", "control character"},
		{"X-A: a\rb", "", "", "control character"},
	} {
		name, value, err := ParseHeader(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseHeader(%q) = %q, %q, %v; want an error with %q", tc.in, name, value, err, tc.err)
			}
			continue
		}
		if err != nil || name != tc.name || value != tc.value {
			t.Errorf("ParseHeader(%q) = %q, %q, %v; want %q, %q", tc.in, name, value, err, tc.name, tc.value)
		}
	}
}

func TestParseSecret(t *testing.T) {
	a, err := ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	b, err := ParseSecret("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil || !bytes.Equal(a, b) || len(a) != 24 {
		t.Errorf("with and without the prefix: %x, %x, %v", a, b, err)
	}
	for _, bad := range []string{"", "whsec_", "whsec_not base64!", "abc"} {
		if _, err := ParseSecret(bad); err == nil {
			t.Errorf("ParseSecret(%q) accepted", bad)
		}
	}
}

// TestSignStandardWebhooksVector checks Sign against the example published with the
// Standard Webhooks specification.
func TestSignStandardWebhooksVector(t *testing.T) {
	key, err := ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	got := Sign(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`))
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Errorf("Sign = %s, want %s", got, want)
	}
	h := http.Header{}
	signHeaders(h, key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`))
	if h.Get("webhook-id") != "msg_p5jXN8AQM9LWM0D4loKWxJek" || h.Get("webhook-timestamp") != "1614265330" || h.Get("webhook-signature") != got {
		t.Errorf("headers %v", h)
	}
}
