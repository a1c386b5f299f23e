package jetstream_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/evtctl/evtctl/internal/eventlog"
	"github.com/evtctl/evtctl/internal/jetstream"
	"github.com/evtctl/evtctl/internal/jetstream/natstest"
	evserver "github.com/evtctl/evtctl/internal/server"
)

// When reads fail while the connection and the stream's info are fine (here: the node's
// NATS user may not make direct gets), /healthz fails too, and says why.
func TestHealthFailsWhenReadsFail(t *testing.T) {
	g := natstest.NewInProcess(t, natstest.InProcessConfig{Configure: func(_ int, o *server.Options) {
		o.Users = []*server.User{{Username: "evtctl", Password: "s3cret"}}
	}})
	s := g.Server(0)
	st, err := jetstream.Open(ctx, jetstream.Options{URL: s.ClientURL(), Stream: "DENIED", Manage: true, Timeout: time.Second,
		NATSOptions: []nats.Option{nats.UserInfo("evtctl", "s3cret")}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Append(ctx, []eventlog.Entry{ev(1)}); err != nil {
		t.Fatal(err)
	}
	// The operator takes away the node's right to direct gets.
	denied := *g.Options(0)
	denied.Users = []*server.User{{
		Username: "evtctl", Password: "s3cret",
		Permissions: &server.Permissions{Publish: &server.SubjectPermission{Allow: []string{">"}, Deny: []string{"$JS.API.DIRECT.GET.>"}}},
	}}
	if err := s.ReloadOptions(&denied); err != nil {
		t.Fatal(err)
	}
	h := evserver.New(evserver.Config{Store: st})
	hs := httptest.NewServer(h)
	defer hs.Close()
	defer h.Shutdown(context.Background())
	if _, err := st.Read(ctx, eventlog.Query{Max: 1}); err == nil {
		t.Fatal("a read without permission for direct gets succeeded")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(hs.URL + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz answers %d while every read fails", resp.StatusCode)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := st.Failed(); err == nil {
		t.Fatal("Failed() is nil while reads fail")
	}
}

// /healthz says "checked":true once the node has looked at its stream and read from it since
// it started, as it does for the embedded log once every record was read back.
func TestHealthChecked(t *testing.T) {
	t.Parallel()
	s := natstest.Solo(t)
	st, err := jetstream.Open(ctx, jetstream.Options{URL: s.ClientURL(), Stream: "CHECKED", Manage: true, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	appendOne(t, st, ev(1))
	h := evserver.New(evserver.Config{Store: st})
	hs := httptest.NewServer(h)
	defer hs.Close()
	defer h.Shutdown(context.Background())
	var last map[string]any
	natstest.WaitUntil(t, 10*time.Second, `/healthz says "checked":true`, func() bool {
		resp, err := http.Get(hs.URL + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		last = nil
		if err := json.NewDecoder(resp.Body).Decode(&last); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK || last["status"] != "ok" || last["items"] != 1.0 {
			t.Fatalf("/healthz: %d %v", resp.StatusCode, last)
		}
		return last["checked"] == true
	})
	if !st.Stats().Checked {
		t.Errorf("Stats().Checked is false; /healthz said %v", last)
	}
}
