package jetstream_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/evtctl/evtctl/internal/eventlog"
	"github.com/evtctl/evtctl/internal/eventlog/storetest"
	"github.com/evtctl/evtctl/internal/jetstream"
	"github.com/evtctl/evtctl/internal/jetstream/natstest"
)

func init() { natstest.ServeIfAsked() } // a test binary started as nats-server serves and exits

// The older server lines people run, as child processes (the newest line runs in process
// in TestSuite). A line whose binary is missing is skipped, naming it.
var olderLines = []string{"2.10", "2.11"}

// A node on each older line reads back what it stored: reads must not depend on batched
// direct gets (2.11) or atomic batches (2.12). A read that waited for an answer such a
// server does not give would fail by the node's timeout.
func TestOlderLinesReadBack(t *testing.T) {
	for _, line := range olderLines {
		t.Run(line, func(t *testing.T) {
			srv := natstest.Start(t, natstest.NeedLine(t, line), natstest.Config{})
			s, err := jetstream.Open(ctx, jetstream.Options{URL: srv.URL(), Stream: "LINES", Manage: true, Timeout: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var want []eventlog.Entry
			for i := range 5 {
				want = append(want, storetest.Ev(i))
			}
			if _, err := s.Append(ctx, want); err != nil {
				t.Fatal(err)
			}
			p, err := s.Read(ctx, eventlog.Query{Max: 10, Ascending: true})
			if err != nil {
				t.Fatalf("read on nats-server %s: %v", srv.Version, err)
			}
			if len(p.Items) != 5 {
				t.Fatalf("read on nats-server %s: %d items of 5", srv.Version, len(p.Items))
			}
			p, err = s.Read(ctx, eventlog.Query{Max: 2})
			if err != nil || len(p.Items) != 2 || !p.More {
				t.Fatalf("newest-first read on nats-server %s: %d items, %v", srv.Version, len(p.Items), err)
			}
		})
	}
}

// The shared store suite on each older line.
func TestSuiteOlderLines(t *testing.T) {
	t.Parallel()
	for _, line := range olderLines {
		t.Run(line, func(t *testing.T) {
			t.Parallel()
			srv := natstest.Start(t, natstest.NeedLine(t, line), natstest.Config{})
			runSuite(t, srv.URL(), 1, false)
		})
	}
}

// A server older than 2.10 (Debian's 2.9.10) is refused at start, with a message naming the
// version found and the one needed.
func TestRefusesServerBefore210(t *testing.T) {
	bin := natstest.NeedLine(t, "2.9")
	version := bin.Version
	srv := natstest.Start(t, bin, natstest.Config{})
	_, err := jetstream.Open(ctx, jetstream.Options{URL: srv.URL(), Stream: "OLD", Manage: true, Timeout: 2 * time.Second})
	if err == nil {
		t.Fatalf("nats-server %s was not refused", version)
	}
	if !strings.Contains(err.Error(), "nats-server "+version) || !strings.Contains(err.Error(), "needs nats-server 2.10 or later") {
		t.Fatalf("the refusal does not name the version found (%s) and the one needed: %v", version, err)
	}
}

// A node whose connection is made again to a server older than 2.10 (here Debian's 2.9 on
// the same port) refuses reads and events and fails /healthz, saying why, and serves again
// once it is connected to a newer server.
func TestRefusesOldServerOnReconnect(t *testing.T) {
	old := natstest.NeedLine(t, "2.9")
	srv := natstest.Start(t, natstest.Self(), natstest.Config{})
	s, err := jetstream.Open(ctx, jetstream.Options{URL: srv.URL(), Stream: "RECON", Manage: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	first := appendOne(t, s, ev(1)).Cursor

	srv.Stop()
	impostor := natstest.Start(t, old, natstest.Config{Port: srv.Config.Port})
	natstest.WaitUntil(t, 20*time.Second, "the node refuses the old server", func() bool {
		err := s.Failed()
		return err != nil && strings.Contains(err.Error(), "nats-server "+old.Version)
	})
	if _, err := s.Read(ctx, eventlog.Query{Max: 1}); err == nil || !strings.Contains(err.Error(), "needs nats-server 2.10 or later") {
		t.Fatalf("a read through nats-server %s: %v", old.Version, err)
	}
	if _, err := s.Append(ctx, []eventlog.Entry{ev(2)}); !errors.Is(err, eventlog.ErrUnavailable) || !strings.Contains(err.Error(), "needs nats-server 2.10") {
		t.Fatalf("an append through nats-server %s: %v", old.Version, err)
	}

	// The old server was left alone: the node created no stream on it.
	time.Sleep(1500 * time.Millisecond) // a look at the stream or two
	_, js := connect(t, impostor.URL())
	if _, err := js.Stream(ctx, "RECON"); !errors.Is(err, natsjs.ErrStreamNotFound) {
		t.Fatalf("the stream on the old server: %v", err)
	}
	impostor.Stop()
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	natstest.WaitUntil(t, 20*time.Second, "the node serves again", func() bool { return s.Failed() == nil })
	p, err := s.Read(ctx, eventlog.Query{Max: 10, Ascending: true})
	if err != nil || len(p.Items) != 1 || p.Items[0].Cursor != first {
		t.Fatalf("a read once back on a newer server: %+v, %v", p.Items, err)
	}

}
