package forward

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"
)

// flaky refuses connections while down is set, else hands requests to h.
type flaky struct {
	mu   sync.Mutex
	down bool
	h    http.Handler
}

func (f *flaky) set(down bool) {
	f.mu.Lock()
	f.down = down
	f.mu.Unlock()
}

func (f *flaky) RoundTrip(req *http.Request) (*http.Response, error) {
	f.mu.Lock()
	down := f.down
	f.mu.Unlock()
	if down {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	}
	return inProcess{f.h}.RoundTrip(req)
}

// A receiver that has not answered in the run and refuses connections stops the run at once
// with an UnreachableError: the event is neither retried nor dead-lettered, and the
// checkpoint does not pass it.
func TestUnreachableReceiverStopsTheRun(t *testing.T) {
	t.Parallel()
	h := &harness{}
	rc := newReceiver()
	tr := &flaky{down: true, h: rc}
	opts := h.options(rc)
	opts.Target.Client = &http.Client{Transport: tr}
	opts.Delays, opts.Concurrency = []time.Duration{time.Millisecond}, 2
	err := forward(t, context.Background(), opts, feed(1, 3))
	var ue *UnreachableError
	if !errors.As(err, &ue) || ue.Target != "http://receiver.test/hook" || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("err = %v, want an UnreachableError for the receiver", err)
	}
	if len(h.results) != 0 || h.lastCheckpoint() != "" {
		t.Fatalf("results %v, checkpoints %v: want none", h.results, h.checkpoints)
	}
}

// Once the receiver has answered in the run, a refused connection is a failure like any
// other: the event is retried, and delivered when the receiver is back.
func TestReceiverDownAfterAnsweringIsRetried(t *testing.T) {
	t.Parallel()
	h := &harness{}
	rc := newReceiver()
	tr := &flaky{h: rc}
	opts := h.options(rc)
	opts.Target.Client = &http.Client{Transport: tr}
	opts.Delays, opts.MaxAttempts = []time.Duration{10 * time.Millisecond}, 1000
	src := make(chan Event, 2)
	src <- eventOf(1)
	opts.OnResult = func(r Result) error {
		h.onResult(r)
		switch {
		case r.ID == "e1" && r.Outcome == OutcomeDelivered:
			tr.set(true) // the receiver goes away after its first answer
			src <- eventOf(2)
			close(src)
		case r.ID == "e2" && r.Outcome == OutcomeRetry:
			tr.set(false)
		}
		return nil
	}
	if err := forward(t, context.Background(), opts, src); err != nil {
		t.Fatal(err)
	}
	if got := h.outcomes("e2"); len(got) < 2 || got[0] != OutcomeRetry || got[len(got)-1] != OutcomeDelivered {
		t.Fatalf("e2: %v, want retried, then delivered", got)
	}
}
