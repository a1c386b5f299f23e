package forward

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/evtctl/evtctl/internal/deliver"
	"github.com/evtctl/evtctl/pkg/cursor"
)

func TestBinaryAndStructuredMode(t *testing.T) {
	for _, mode := range []deliver.Mode{deliver.Binary, deliver.Structured} {
		t.Run(mode.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rc := newReceiver()
				h := &harness{}
				opts := h.options(rc)
				opts.Target.Mode = mode
				opts.Target.Header = http.Header{"X-Team": {"blue"}}
				if err := forward(t, t.Context(), opts, feed(1, 2)); err != nil {
					t.Fatal(err)
				}
				reqs := rc.requests()
				if len(reqs) != 2 || reqs[0].id != "e1" || reqs[1].id != "e2" {
					t.Fatalf("receiver saw %v, want e1 then e2", rc.ids())
				}
				r := reqs[0]
				if r.method != http.MethodPost || r.header.Get("X-Team") != "blue" {
					t.Errorf("method %s, X-Team %q", r.method, r.header.Get("X-Team"))
				}
				switch mode {
				case deliver.Binary:
					if r.header.Get("Ce-Type") != "org.example.test.created.v1" || r.header.Get("Content-Type") != "application/json" || r.body != `{"n":1}` {
						t.Errorf("binary request: headers %v, body %s", r.header, r.body)
					}
				case deliver.Structured:
					if !strings.HasPrefix(r.header.Get("Content-Type"), "application/cloudevents+json") || !strings.Contains(r.body, `"id":"e1"`) {
						t.Errorf("structured request: headers %v, body %s", r.header, r.body)
					}
				}
				if got := h.outcomes("e1"); !slices.Equal(got, []Outcome{OutcomeDelivered}) {
					t.Errorf("outcomes of e1: %v", got)
				}
				if h.lastCheckpoint() != cursorOf(2) {
					t.Errorf("checkpoint %s, want %s", h.lastCheckpoint(), cursorOf(2))
				}
			})
		})
	}
}

func TestRetry500Then200(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := newReceiver().on("e1", step{status: 500, body: `{"error":"database down"}`}, step{status: 200})
		h := &harness{}
		opts := h.options(rc)
		opts.Delays = []time.Duration{10 * time.Second, time.Minute}
		start := time.Now()
		if err := forward(t, t.Context(), opts, feed(1, 2)); err != nil {
			t.Fatal(err)
		}
		if got := rc.ids(); !slices.Equal(got, []string{"e1", "e2", "e1"}) {
			t.Fatalf("receiver saw %v, want e1 e2 e1", got)
		}
		if got := h.outcomes("e1"); !slices.Equal(got, []Outcome{OutcomeRetry, OutcomeDelivered}) {
			t.Fatalf("outcomes of e1: %v", got)
		}
		r := h.results[0]
		if r.Status != 500 || r.Tier != 1 || r.Attempt != 1 || r.Reason != "database down" || !r.NextAttempt.Equal(start.Add(10*time.Second)) {
			t.Errorf("first result %+v", r)
		}
		// The retry came when tier 1 matured, on the fake clock.
		if d := rc.requests()[2].at.Sub(start); d != 10*time.Second {
			t.Errorf("retry after %v, want 10s", d)
		}
	})
}

func TestRetryAfterIsHonoured(t *testing.T) {
	for _, tc := range []struct {
		name, value string
	}{
		{"seconds", "2"},
		{"http-date", "DATE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				v := tc.value
				if v == "DATE" {
					v = start.Add(2 * time.Second).UTC().Format(http.TimeFormat)
				}
				rc := newReceiver().on("e1", step{status: 503, header: map[string]string{"Retry-After": v}}, step{status: 200})
				h := &harness{}
				opts := h.options(rc)
				opts.Delays = []time.Duration{time.Millisecond}
				if err := forward(t, t.Context(), opts, feed(1, 1)); err != nil {
					t.Fatal(err)
				}
				reqs := rc.requests()
				if len(reqs) != 2 {
					t.Fatalf("receiver saw %v, want two attempts", rc.ids())
				}
				// Not after the 1ms of the tier: after the 2s the receiver asked for.
				if d := reqs[1].at.Sub(reqs[0].at); d != 2*time.Second {
					t.Errorf("second attempt %v after the first, want 2s", d)
				}
				if got := h.outcomes("e1"); !slices.Equal(got, []Outcome{OutcomeRetry, OutcomeDelivered}) {
					t.Errorf("outcomes %v", got)
				}
			})
		})
	}
}

func TestTooManyRequestsPausesEveryDelivery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// e1 fails and is due again after 1s, inside the pause that e2's 429 asks for.
		rc := newReceiver().
			on("e1", step{status: 500}, step{status: 204}).
			on("e2", step{status: 429, header: map[string]string{"Retry-After": "3"}}, step{status: 204})
		h := &harness{}
		opts := h.options(rc)
		opts.Delays = []time.Duration{time.Second}
		start := time.Now()
		if err := forward(t, t.Context(), opts, feed(1, 4)); err != nil {
			t.Fatal(err)
		}
		reqs := rc.requests()
		// At the end of the pause the retries (e1 due since 1s, e2 due now) and the new
		// events take turns.
		if got := rc.ids(); !slices.Equal(got, []string{"e1", "e2", "e1", "e3", "e2", "e4"}) {
			t.Fatalf("receiver saw %v", got)
		}
		// Nothing at all was sent for the 3 seconds the receiver asked for.
		for _, r := range reqs[2:] {
			if d := r.at.Sub(start); d < 3*time.Second {
				t.Errorf("%s sent %v after the start, inside the 3s pause", r.id, d)
			}
		}
	})
}

func TestGoneStopsForGood(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		rc := newReceiver().on("e3", step{status: 410, body: "hook deleted"})
		h := &harness{}
		st, err := OpenState(filepath.Join(dir, "state"))
		if err != nil {
			t.Fatal(err)
		}
		opts := h.options(rc)
		opts.State = st
		err = forward(t, t.Context(), opts, feed(1, 6))
		var ge *GoneError
		if !errors.As(err, &ge) {
			t.Fatalf("Run = %v, want a GoneError", err)
		}
		if ge.Record.ID != "e3" || ge.Record.Reason != "hook deleted" || !strings.Contains(err.Error(), "remove "+st.GonePath()) {
			t.Errorf("error %q, record %+v", err, ge.Record)
		}
		if got := rc.ids(); !slices.Equal(got, []string{"e1", "e2", "e3"}) {
			t.Errorf("receiver saw %v, want nothing after the 410", got)
		}
		// The checkpoint stops before the event the 410 answered.
		if h.lastCheckpoint() != cursorOf(2) {
			t.Errorf("checkpoint %s, want %s", h.lastCheckpoint(), cursorOf(2))
		}
		st.Close()

		// A new run refuses before sending anything.
		st, err = OpenState(filepath.Join(dir, "state"))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		rc2 := newReceiver()
		opts = h.options(rc2)
		opts.State = st
		if err := forward(t, t.Context(), opts, feed(3, 6)); !errors.As(err, &ge) {
			t.Fatalf("second Run = %v, want a GoneError", err)
		}
		if n := len(rc2.requests()); n != 0 {
			t.Errorf("the second run sent %d requests", n)
		}
	})
}

func TestOtherClientErrorsAreDeadLettered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dl := filepath.Join(t.TempDir(), "dead.jsonl")
		rc := newReceiver().
			on("e2", step{status: 404, body: `{"error":"no such hook"}`}).
			on("e3", step{status: 501}).
			on("e4", step{status: 302, header: map[string]string{"Location": "/elsewhere"}})
		h := &harness{}
		opts := h.options(rc)
		opts.DeadLetter = dl
		if err := forward(t, t.Context(), opts, feed(1, 5)); err != nil {
			t.Fatal(err)
		}
		if got := rc.ids(); !slices.Equal(got, []string{"e1", "e2", "e3", "e4", "e5"}) {
			t.Fatalf("receiver saw %v: each once, none retried", got)
		}
		lines := readDeadLetters(t, dl)
		if len(lines) != 3 {
			t.Fatalf("%d dead letters, want 3", len(lines))
		}
		want := []struct {
			id     string
			status int
			reason string
		}{{"e2", 404, "no such hook"}, {"e3", 501, ""}, {"e4", 302, `redirect to "/elsewhere" not followed`}}
		for i, w := range want {
			l := lines[i]
			if l.ID != w.id || l.Status != w.status || l.Attempts != 1 || !strings.Contains(l.Reason, w.reason) || l.Cursor == "" || !strings.Contains(string(l.Event), `"id":"`+w.id+`"`) {
				t.Errorf("dead letter %d: %+v, want %+v", i, l, w)
			}
		}
		if h.lastCheckpoint() != cursorOf(5) {
			t.Errorf("checkpoint %s: dead-lettered events are settled", h.lastCheckpoint())
		}
	})
}

func readDeadLetters(t *testing.T, path string) []DeadLetter {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []DeadLetter
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var d DeadLetter
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			t.Fatalf("dead letter %q: %v", sc.Text(), err)
		}
		out = append(out, d)
	}
	return out
}

func TestTimeoutIsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := newReceiver().on("e1", step{hang: true}, step{status: 200})
		h := &harness{}
		opts := h.options(rc)
		opts.Target.Timeout = 2 * time.Second
		opts.Delays = []time.Duration{time.Second}
		if err := forward(t, t.Context(), opts, feed(1, 1)); err != nil {
			t.Fatal(err)
		}
		reqs := rc.requests()
		if len(reqs) != 2 || reqs[0].status != 0 || reqs[1].status != 200 {
			t.Fatalf("receiver saw %+v", reqs)
		}
		if d := reqs[1].at.Sub(reqs[0].at); d != 3*time.Second {
			t.Errorf("retry %v after the first attempt, want the 2s timeout and the 1s tier", d)
		}
		if r := h.results[0]; r.Outcome != OutcomeRetry || !strings.Contains(r.Reason, "no reply within 2s") {
			t.Errorf("first result %+v", r)
		}
	})
}

func TestMaxAttemptsThenDeadLetter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dl := filepath.Join(t.TempDir(), "dead.jsonl")
		rc := newReceiver().on("e1", step{status: 502})
		h := &harness{}
		opts := h.options(rc)
		opts.Delays = []time.Duration{time.Second, time.Minute}
		opts.MaxAttempts = 5 // past the tiers: the last delay repeats
		opts.DeadLetter = dl
		start := time.Now()
		if err := forward(t, t.Context(), opts, feed(1, 1)); err != nil {
			t.Fatal(err)
		}
		var at []time.Duration
		for _, r := range rc.requests() {
			at = append(at, r.at.Sub(start))
		}
		want := []time.Duration{0, time.Second, time.Second + time.Minute, time.Second + 2*time.Minute, time.Second + 3*time.Minute}
		if !slices.Equal(at, want) {
			t.Errorf("attempts at %v, want %v", at, want)
		}
		lines := readDeadLetters(t, dl)
		if len(lines) != 1 || lines[0].Attempts != 5 || lines[0].Status != 502 || !strings.Contains(lines[0].Reason, "gave up after 5 attempts") {
			t.Errorf("dead letters %+v", lines)
		}
	})
}

func TestRedirects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := newReceiver()
		rc.route = func(w http.ResponseWriter, r *http.Request) bool {
			switch {
			case r.Host == "receiver.test" && r.URL.Path == "/hook" && r.Header.Get("Ce-Id") == "e1":
				w.Header().Set("Location", "/moved")
				w.WriteHeader(http.StatusTemporaryRedirect)
				return true
			case r.Host == "receiver.test" && r.URL.Path == "/hook" && r.Header.Get("Ce-Id") == "e2":
				w.Header().Set("Location", "http://other.test/hook")
				w.WriteHeader(http.StatusPermanentRedirect)
				return true
			case r.URL.Path == "/loop":
				w.Header().Set("Location", "/loop")
				w.WriteHeader(http.StatusTemporaryRedirect)
				return true
			case r.Header.Get("Ce-Id") == "e3":
				w.Header().Set("Location", "/loop")
				w.WriteHeader(http.StatusTemporaryRedirect)
				return true
			}
			return false
		}
		h := &harness{}
		opts := h.options(rc)
		opts.Target.Header = http.Header{"X-Api-Key": {"k"}}
		opts.Target.Secret = []byte("0123456789abcdef")
		opts.DeadLetter = filepath.Join(t.TempDir(), "dead.jsonl")
		if err := forward(t, t.Context(), opts, feed(1, 3)); err != nil {
			t.Fatal(err)
		}
		var moved, other *seen
		reqs := rc.requests()
		for i := range reqs {
			r := &reqs[i]
			switch {
			case r.path == "/moved":
				moved = r
			case r.host == "other.test":
				other = r
			}
		}
		if moved == nil || moved.method != http.MethodPost || moved.body != `{"n":1}` || moved.header.Get("X-Api-Key") != "k" || moved.header.Get(HeaderWebhookSignature) == "" {
			t.Errorf("the same-origin redirect target got %+v", moved)
		}
		if other == nil || other.method != http.MethodPost || other.body != `{"n":2}` || other.header.Get("Ce-Id") != "e2" {
			t.Fatalf("the other origin got %+v", other)
		}
		if other.header.Get("X-Api-Key") != "" || other.header.Get(HeaderWebhookSignature) != "" || other.header.Get(HeaderWebhookID) != "" {
			t.Errorf("credentials went to another origin: %v", other.header)
		}
		if got := h.outcomes("e1"); !slices.Equal(got, []Outcome{OutcomeDelivered}) {
			t.Errorf("e1: %v", got)
		}
		if h.results[0].Redirects != 1 {
			t.Errorf("e1 followed %d redirects, want 1", h.results[0].Redirects)
		}
		// A redirect loop is cut after MaxRedirects hops, and not retried.
		loops := 0
		for _, r := range reqs {
			if r.path == "/loop" {
				loops++
			}
		}
		if loops != deliver.DefaultMaxRedirects || !slices.Equal(h.outcomes("e3"), []Outcome{OutcomeDeadLetter}) {
			t.Errorf("loop: %d hops, outcomes %v", loops, h.outcomes("e3"))
		}
	})
}

func TestSlowDeliveryHoldsTheCheckpointOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := newReceiver().on("e2", step{sleep: 5 * time.Second, status: 200})
		h := &harness{}
		opts := h.options(rc)
		opts.Concurrency = 4
		opts.CheckpointInterval = time.Millisecond
		if err := forward(t, t.Context(), opts, feed(1, 20)); err != nil {
			t.Fatal(err)
		}
		// Everything else was delivered while e2 was slow ...
		for i, entry := range h.log {
			if entry == "delivered e2" {
				if n := slices.Index(h.log, "delivered e20"); n > i {
					t.Errorf("e20 was delivered after the slow e2: %v", h.log)
				}
				break
			}
			// ... but no checkpoint passed e2 before it was delivered.
			if c, ok := strings.CutPrefix(entry, "checkpoint "); ok && cursor.CompareText(c, cursorOf(2)) >= 0 {
				t.Errorf("checkpoint %s passed e2 while it was in flight: %v", c, h.log)
			}
		}
		if h.lastCheckpoint() != cursorOf(20) {
			t.Errorf("final checkpoint %s", h.lastCheckpoint())
		}
		if n := len(rc.requests()); n != 20 {
			t.Errorf("%d requests, want 20", n)
		}
	})
}

// TestFailingEventDoesNotDelayOthers: one event fails for good while new events keep
// arriving; each of those is sent the moment it arrives, and the failing one is tried on its
// own schedule, exactly.
func TestFailingEventDoesNotDelayOthers(t *testing.T) {
	for _, conc := range []int{1, 4} {
		t.Run(fmt.Sprint("concurrency=", conc), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rc := newReceiver().on("e1", step{status: 500})
				h := &harness{}
				opts := h.options(rc)
				opts.Concurrency = conc
				opts.Delays = []time.Duration{10 * time.Second, time.Minute, 10 * time.Minute, time.Hour}
				opts.DeadLetter = filepath.Join(t.TempDir(), "dead.jsonl")
				start := time.Now()
				// A new event every 30 seconds for two hours, and a burst of 50 at the start.
				src := make(chan Event)
				arrived := map[string]time.Duration{}
				go func() {
					defer close(src)
					n := 1
					for ; n <= 50; n++ {
						arrived[eventOf(n).Cursor] = 0
						src <- eventOf(n)
					}
					for ; n <= 290; n++ {
						time.Sleep(30 * time.Second)
						arrived[eventOf(n).Cursor] = time.Since(start)
						src <- eventOf(n)
					}
				}()
				if err := forward(t, t.Context(), opts, src); err != nil {
					t.Fatal(err)
				}
				var e1 []time.Duration
				count := map[string]int{}
				for _, r := range rc.requests() {
					count[r.id]++
					if r.id == "e1" {
						e1 = append(e1, r.at.Sub(start))
						continue
					}
					// No event waits for the failing one: each is sent when it arrives.
					if want := arrived[cursorOf(atoi(r.id[1:]))]; r.at.Sub(start) != want {
						t.Errorf("%s sent at %v, it arrived at %v", r.id, r.at.Sub(start), want)
					}
				}
				// The failing event is tried on its own schedule: the tiers, to the second.
				want := []time.Duration{0, 10 * time.Second, 70 * time.Second, 670 * time.Second, 4270 * time.Second}
				if !slices.Equal(e1, want) {
					t.Errorf("e1 tried at %v, want %v", e1, want)
				}
				if len(count) != 290 {
					t.Errorf("%d distinct events sent, want 290", len(count))
				}
				for id, n := range count {
					if id != "e1" && n != 1 {
						t.Errorf("%s sent %d times", id, n)
					}
				}
				if got := h.outcomes("e1"); len(got) != 5 || got[4] != OutcomeDeadLetter {
					t.Errorf("outcomes of e1: %v", got)
				}
			})
		})
	}
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

func TestOrderedBlocksOnAFailingEvent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := newReceiver().on("e2", step{status: 500}, step{status: 503}, step{status: 200})
		h := &harness{}
		opts := h.options(rc)
		opts.Ordered = true
		opts.Concurrency = 8 // ignored: ordered is one at a time
		opts.Delays = []time.Duration{time.Second, 2 * time.Second}
		if err := forward(t, t.Context(), opts, feed(1, 5)); err != nil {
			t.Fatal(err)
		}
		if got := rc.ids(); !slices.Equal(got, []string{"e1", "e2", "e2", "e2", "e3", "e4", "e5"}) {
			t.Errorf("receiver saw %v", got)
		}
	})
}

func TestSignedDeliveryVerifies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		key, err := ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
		if err != nil {
			t.Fatal(err)
		}
		rc := newReceiver()
		h := &harness{}
		opts := h.options(rc)
		opts.Target.Secret = key
		if err := forward(t, t.Context(), opts, feed(1, 1)); err != nil {
			t.Fatal(err)
		}
		r := rc.requests()[0]
		ts := r.header.Get(HeaderWebhookTimestamp)
		if r.header.Get(HeaderWebhookID) != "e1" || ts != itoa(time.Now().Unix()) {
			t.Fatalf("headers %v", r.header)
		}
		if want := Sign(key, "e1", time.Now().Unix(), []byte(r.body)); r.header.Get(HeaderWebhookSignature) != want {
			t.Errorf("signature %q, want %q", r.header.Get(HeaderWebhookSignature), want)
		}
	})
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestInvalidEventIsDeadLettered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := newReceiver()
		h := &harness{}
		opts := h.options(rc)
		dl := filepath.Join(t.TempDir(), "dead.jsonl")
		opts.DeadLetter = dl
		src := make(chan Event, 2)
		src <- Event{Cursor: cursorOf(1), Data: []byte(`{"specversion":"1.0","id":"bad","source":"/s","type":"t","ext":{"nested":true}}`)}
		src <- eventOf(2)
		close(src)
		if err := forward(t, t.Context(), opts, src); err != nil {
			t.Fatal(err)
		}
		if got := rc.ids(); !slices.Equal(got, []string{"e2"}) {
			t.Errorf("receiver saw %v", got)
		}
		lines := readDeadLetters(t, dl)
		if len(lines) != 1 || lines[0].ID != "bad" || lines[0].Status != 0 || !strings.Contains(lines[0].Reason, "binary mode") {
			t.Errorf("dead letters %+v", lines)
		}
	})
}

func TestMarkersMoveTheCheckpoint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := newReceiver()
		h := &harness{}
		src := make(chan Event, 3)
		src <- eventOf(1)
		src <- Event{Cursor: cursorOf(9)} // nothing matched up to 9
		close(src)
		if err := forward(t, t.Context(), h.options(rc), src); err != nil {
			t.Fatal(err)
		}
		if h.lastCheckpoint() != cursorOf(9) {
			t.Errorf("checkpoint %s, want %s", h.lastCheckpoint(), cursorOf(9))
		}
	})
}

func TestInterruptLeavesStateConsistent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		st, err := OpenState(dir)
		if err != nil {
			t.Fatal(err)
		}
		// e2 hangs (in flight when interrupted, past the grace), e3 waits for a retry.
		rc := newReceiver().on("e2", step{hang: true}).on("e3", step{status: 500}, step{status: 200})
		h := &harness{}
		opts := h.options(rc)
		opts.State, opts.Concurrency, opts.Grace = st, 4, time.Second
		opts.Target.Timeout = time.Hour
		opts.Delays = []time.Duration{time.Hour}
		ctx, cancel := context.WithCancel(t.Context())
		src := make(chan Event)
		go func() {
			for i := 1; i <= 5; i++ {
				src <- eventOf(i)
			}
			time.Sleep(time.Minute)
			cancel()
		}()
		if err := forward(t, ctx, opts, src); !errors.Is(err, context.Canceled) {
			t.Fatalf("Run = %v, want context.Canceled", err)
		}
		// The checkpoint stops before the abandoned e2; e3 is in the store.
		if h.lastCheckpoint() != cursorOf(1) {
			t.Errorf("checkpoint %s, want %s", h.lastCheckpoint(), cursorOf(1))
		}
		st.Close()

		// The next run gets the log from the checkpoint on: e2 is sent again (it was in
		// flight), e4 and e5 are not (the journal has them), e3 comes from the store.
		st, err = OpenState(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if st.Pending() != 1 {
			t.Errorf("%d events in the store, want 1", st.Pending())
		}
		rc2 := newReceiver()
		h2 := &harness{}
		opts = h2.options(rc2)
		opts.State = st
		opts.Delays = []time.Duration{time.Hour}
		if err := forward(t, t.Context(), opts, feed(2, 5)); err != nil {
			t.Fatal(err)
		}
		if got := rc2.ids(); !slices.Equal(got, []string{"e2", "e3"}) {
			t.Errorf("second run sent %v, want e2 then e3", got)
		}
		if h2.lastCheckpoint() != cursorOf(5) || st.Pending() != 0 {
			t.Errorf("checkpoint %s, %d pending", h2.lastCheckpoint(), st.Pending())
		}
	})
}

// TestCrashBetweenStoreAndCheckpoint covers the crash window that matters: a failed event is
// in the retry store (journal fsynced) but the checkpoint was not saved. The restart reads
// the event from the log again and must neither lose it nor send it twice (once as new, once
// from the store).
func TestCrashBetweenStoreAndCheckpoint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		st, err := OpenState(dir)
		if err != nil {
			t.Fatal(err)
		}
		rc := newReceiver().on("e2", step{status: 503}, step{status: 200})
		h := &harness{}
		opts := h.options(rc)
		opts.State = st
		opts.Delays = []time.Duration{time.Minute}
		crash := errors.New("crash")
		// The process dies when it is about to record a checkpoint past e2: after e2 went into
		// the store.
		saved := ""
		opts.Checkpoint = func(c string) error {
			if cursor.CompareText(c, cursorOf(2)) >= 0 {
				return crash
			}
			saved = c
			return nil
		}
		if err := forward(t, t.Context(), opts, feed(1, 3)); !errors.Is(err, crash) {
			t.Fatalf("Run = %v", err)
		}
		st.Close()
		if saved != cursorOf(1) || st.js.live[cursorOf(2)] == nil {
			t.Fatalf("the crash came at the wrong time: checkpoint %q, store %v", saved, st.js.live)
		}

		st, err = OpenState(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		rc2 := newReceiver().on("e2", step{status: 200})
		h2 := &harness{}
		opts = h2.options(rc2)
		opts.State = st
		opts.Delays = []time.Duration{time.Minute}
		start := time.Now()
		if err := forward(t, t.Context(), opts, feed(2, 3)); err != nil { // the log after the checkpoint
			t.Fatal(err)
		}
		// e1 was recorded as delivered: not sent again. e3 was in flight at the crash: it may
		// be sent again. e2 comes once, from the store, when its tier matured: not at once
		// as a new event.
		count := map[string]int{}
		for _, r := range rc2.requests() {
			count[r.id]++
			if r.id == "e2" {
				if d := r.at.Sub(start); d != time.Minute {
					t.Errorf("e2 sent %v after the restart, want 1m", d)
				}
			}
		}
		if count["e1"] != 0 || count["e2"] != 1 || count["e3"] > 1 {
			t.Fatalf("second run sent %v", rc2.ids())
		}
		if h2.lastCheckpoint() != cursorOf(3) {
			t.Errorf("checkpoint %s", h2.lastCheckpoint())
		}
	})
}

func TestMaxPendingPausesReading(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := newReceiver()
		for i := 1; i <= 10; i++ {
			rc.on("e"+strconv.Itoa(i), step{status: 500}, step{status: 200})
		}
		h := &harness{}
		opts := h.options(rc)
		opts.MaxPending = 2
		opts.Delays = []time.Duration{time.Minute}
		start := time.Now()
		if err := forward(t, t.Context(), opts, feed(1, 10)); err != nil {
			t.Fatal(err)
		}
		reqs := rc.requests()
		first := 0
		for _, r := range reqs {
			if r.at.Equal(start) {
				first++
			}
		}
		// Two waiting in the store (and the one read before that was known) stop reading.
		if first != 3 {
			t.Errorf("%d events tried at once, want 3: %v", first, rc.ids())
		}
		if len(reqs) != 20 {
			t.Errorf("%d requests, want 20 (each event twice)", len(reqs))
		}
	})
}

// With raw header encoding, values go out as stored; one that cannot go in a header
// unencoded is dead-lettered with the reason, and the next event is still delivered.
func TestRawHeaderEncoding(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc := newReceiver()
		h := &harness{}
		opts := h.options(rc)
		opts.Target.HeaderEncoding = deliver.HeaderRaw
		dl := filepath.Join(t.TempDir(), "dead.jsonl")
		opts.DeadLetter = dl
		src := make(chan Event, 2)
		src <- Event{Cursor: cursorOf(1), Data: []byte(`{"specversion":"1.0","id":"e1","source":"/s","type":"t","subject":"say \"hi\" 100%","data":{"a": 1}` + "\n}")}
		src <- Event{Cursor: cursorOf(2), Data: []byte(`{"specversion":"1.0","id":"e2","source":"/s","type":"t","subject":"café"}`)}
		close(src)
		if err := forward(t, t.Context(), opts, src); err != nil {
			t.Fatal(err)
		}
		reqs := rc.requests()
		if len(reqs) != 1 || reqs[0].header.Get("Ce-Subject") != `say "hi" 100%` || reqs[0].body != "{\"a\": 1}\n" {
			t.Fatalf("receiver saw %+v", reqs)
		}
		lines := readDeadLetters(t, dl)
		if len(lines) != 1 || lines[0].ID != "e2" || !strings.Contains(lines[0].Reason, `attribute "subject"`) || !strings.Contains(lines[0].Reason, "non-ASCII") {
			t.Errorf("dead letters %+v", lines)
		}
	})
}
