package jetstream_test

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/tidwall/gjson"

	"github.com/evtctl/evtctl/internal/eventlog"
	"github.com/evtctl/evtctl/internal/jetstream"
	"github.com/evtctl/evtctl/internal/jetstream/natstest"
	"github.com/evtctl/evtctl/internal/testwait"
	"github.com/evtctl/evtctl/pkg/cursor"
)

// publishRaw stores a message as another NATS program would.
func publishRaw(t testing.TB, js natsjs.JetStream, subject string, data []byte, hdr ...string) *natsjs.PubAck {
	t.Helper()
	m := nats.NewMsg(subject)
	m.Data = data
	for i := 0; i+1 < len(hdr); i += 2 {
		m.Header[hdr[i]] = append(m.Header[hdr[i]], hdr[i+1])
	}
	a, err := js.PublishMsg(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// foreignStream creates a stream as an operator would, without evtctl.
func foreignStream(t testing.TB, js natsjs.JetStream, cfg natsjs.StreamConfig) natsjs.Stream {
	t.Helper()
	str, err := js.CreateStream(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return str
}

func openForeign(t testing.TB, url, stream string) *jetstream.Store {
	t.Helper()
	s, err := jetstream.Open(ctx, jetstream.Options{URL: url, Stream: stream, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// A node on a stream evtctl did not write presents every message as a CloudEvent: binary
// mode and structured CloudEvents as they are, anything else wrapped. Cursors are the
// stream's sequences and stored times, and the node takes no events.
func TestForeignStreamPresentsEveryMessage(t *testing.T) {
	for _, direct := range []bool{true, false} {
		name := "ORDERS"
		if !direct {
			name = "ORDERS_NODIRECT"
		}
		t.Run(name, func(t *testing.T) {
			srv := natstest.Solo(t)
			_, js := connect(t, srv.ClientURL())
			str := foreignStream(t, js, natsjs.StreamConfig{Name: name, Subjects: []string{"orders.>"}, AllowDirect: direct})
			binData := []byte{0, 1, 2, 0xff, 0xfe}
			publishRaw(t, js, "orders.eu.cancelled", []byte(`{"order": 1}`),
				"ce-specversion", "1.0", "ce-id", "c-1", "Ce-Source", "/shop", "ce-type", "org.example.order.cancelled.v1",
				"ce-subject", "order-1", "ce-tenant", "eu", "Content-Type", "application/json")
			publishRaw(t, js, "orders.eu.created", []byte("{\n  \"specversion\": \"1.0\", \"id\": \"s-1\", \"source\": \"/shop\",\n  \"type\": \"org.example.order.created.v1\", \"data\": {\"order\": 2}\n}"))
			publishRaw(t, js, "orders.eu.created", []byte(`{"order":3,"total":12.5}`), "Nats-Msg-Id", "o-3")
			publishRaw(t, js, "orders.us.note", []byte("hello, world"))
			publishRaw(t, js, "orders.us.blob", binData)
			publishRaw(t, js, "orders.us.csv", []byte("a,b\n1,2\n"), "Content-Type", "text/csv")
			publishRaw(t, js, "orders.us.empty", nil)
			publishRaw(t, js, "orders.us.badce", []byte(`{"specversion":"1.0","id":""}`))

			s := openForeign(t, srv.ClientURL(), name)
			p, err := s.Read(ctx, eventlog.Query{Max: 100, Ascending: true})
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Items) != 8 {
				t.Fatalf("%d items of 8 messages", len(p.Items))
			}
			info, err := str.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for i, it := range p.Items {
				if it.Cursor.Seq != uint64(i+1) || it.Cursor.Width != cursor.NodeWidth {
					t.Fatalf("item %d has cursor %v: the sequence part is the stream sequence", i, it.Cursor)
				}
				if !gjson.ValidBytes(it.JSON) || strings.Contains(string(it.JSON), "\n") {
					t.Fatalf("item %d is not compact JSON: %s", i, it.JSON)
				}
				if gjson.GetBytes(it.JSON, "specversion").String() != "1.0" || gjson.GetBytes(it.JSON, "type").String() != it.Type {
					t.Fatalf("item %d is not a CloudEvent of its type %q: %s", i, it.Type, it.JSON)
				}
			}
			if !p.Items[0].Cursor.Time().Before(info.Created.Add(time.Minute)) {
				t.Fatalf("cursor time %v is not the stored time", p.Items[0].Cursor.Time())
			}
			get := func(i int, path string) string { return gjson.GetBytes(p.Items[i].JSON, path).String() }
			raw := func(i int, path string) string { return gjson.GetBytes(p.Items[i].JSON, path).Raw }
			check := func(i int, path, want string) {
				t.Helper()
				if got := get(i, path); got != want {
					t.Fatalf("item %d: %s is %q, want %q in %s", i, path, got, want, p.Items[i].JSON)
				}
			}
			// Binary mode.
			check(0, "id", "c-1")
			check(0, "source", "/shop")
			check(0, "type", "org.example.order.cancelled.v1")
			check(0, "subject", "order-1")
			check(0, "tenant", "eu")
			check(0, "datacontenttype", "application/json")
			check(0, "data.order", "1")
			// Structured, as it is.
			check(1, "id", "s-1")
			check(1, "type", "org.example.order.created.v1")
			check(1, "data.order", "2")
			// Wrapped: id from Nats-Msg-Id or the sequence, the stream as source, the
			// subject as type and subject, the stored time, data by what it is.
			check(2, "id", "o-3")
			check(2, "source", "jetstream:"+name)
			check(2, "type", "orders.eu.created")
			check(2, "subject", "orders.eu.created")
			check(2, "datacontenttype", "application/json")
			if raw(2, "data") != `{"order":3,"total":12.5}` {
				t.Fatalf("JSON payload not embedded as data: %s", p.Items[2].JSON)
			}
			ts, err := time.Parse(time.RFC3339Nano, get(2, "time"))
			if err != nil || ts.UnixNano() != p.Items[2].Cursor.TS {
				t.Fatalf("time %q is not the stored time of the cursor %v", get(2, "time"), p.Items[2].Cursor)
			}
			check(3, "id", "4")
			check(3, "data", "hello, world")
			check(3, "datacontenttype", "text/plain; charset=utf-8")
			check(4, "data_base64", base64.StdEncoding.EncodeToString(binData))
			check(4, "datacontenttype", "application/octet-stream")
			check(5, "datacontenttype", "text/csv")
			check(5, "data", "a,b\n1,2\n")
			if gjson.GetBytes(p.Items[6].JSON, "data").Exists() || gjson.GetBytes(p.Items[6].JSON, "data_base64").Exists() {
				t.Fatalf("an empty message has data: %s", p.Items[6].JSON)
			}
			check(7, "type", "orders.us.badce") // not a valid CloudEvent: wrapped
			check(7, "data.specversion", "1.0")

			// Newest first too, and a filter sees the events as served.
			p, err = s.Read(ctx, eventlog.Query{Max: 3, Match: func(b []byte) bool { return gjson.GetBytes(b, "subject").String() == "orders.eu.created" }})
			if err != nil || len(p.Items) != 1 || p.Items[0].Cursor.Seq != 3 {
				t.Fatalf("filtered on subject: %+v, %v", p.Items, err)
			}
			// The node takes no events, and says how it would.
			_, err = s.Append(ctx, []eventlog.Entry{ev(1)})
			if !errors.Is(err, eventlog.ErrReadOnly) || !strings.Contains(err.Error(), "read-only") || !strings.Contains(err.Error(), "--nats-subject") {
				t.Fatalf("appending to a stream evtctl did not write: %v", err)
			}
			if !strings.Contains(s.Describe(), "read-only") {
				t.Fatalf("Describe: %s", s.Describe())
			}
		})
	}
}

// Given a subject the stream takes, a node publishes events to a stream it did not write,
// beside its other messages; a subject it does not take is refused at start.
func TestForeignStreamWithIngest(t *testing.T) {
	srv := natstest.Solo(t)
	_, js := connect(t, srv.ClientURL())
	foreignStream(t, js, natsjs.StreamConfig{Name: "SHOP", Subjects: []string{"shop.>"}, AllowDirect: true})
	publishRaw(t, js, "shop.orders", []byte(`{"order":1}`))
	if _, err := jetstream.Open(ctx, jetstream.Options{URL: srv.ClientURL(), Stream: "SHOP", Subject: "elsewhere.events"}); err == nil || !strings.Contains(err.Error(), `does not take subject "elsewhere.events"`) {
		t.Fatalf("a subject the stream does not take: %v", err)
	}
	s, err := jetstream.Open(ctx, jetstream.Options{URL: srv.ClientURL(), Stream: "SHOP", Subject: "shop.events"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := appendOne(t, s, ev(1)).Cursor
	p, err := s.Read(ctx, eventlog.Query{Max: 10, Ascending: true})
	if err != nil || len(p.Items) != 2 || p.Items[1].Cursor != c || p.Items[1].Type != ev(1).Type || p.Items[0].Type != "shop.orders" {
		t.Fatalf("items %+v, %v", p.Items, err)
	}
}

// On a stream that keeps the newest messages of each subject (max_msgs_per_subject), the
// holes older messages leave are the stream's retention: readers step over them, and are
// not told of lost events. On one without, a deleted message is a loss.
func TestForeignStreamHoles(t *testing.T) {
	srv := natstest.Solo(t)
	_, js := connect(t, srv.ClientURL())
	foreignStream(t, js, natsjs.StreamConfig{Name: "LATEST", Subjects: []string{"price.>"}, AllowDirect: true, MaxMsgsPerSubject: 1})
	publishRaw(t, js, "price.a", []byte(`1`))
	publishRaw(t, js, "price.b", []byte(`2`))
	publishRaw(t, js, "price.b", []byte(`3`)) // removes 2
	publishRaw(t, js, "price.c", []byte(`4`))
	s := openForeign(t, srv.ClientURL(), "LATEST")
	p, err := s.Read(ctx, eventlog.Query{Max: 10, Ascending: true})
	if err != nil || len(p.Items) != 3 || p.More || p.AtLoss {
		t.Fatalf("read across a per-subject hole: %d items, more %v, at loss %v, %v", len(p.Items), p.More, p.AtLoss, err)
	}
	p2, err := s.Read(ctx, eventlog.Query{After: p.Items[0].Cursor, Max: 10, Ascending: true})
	if err != nil || len(p2.Items) != 2 || p2.Oldest != p.Items[0].Cursor {
		t.Fatalf("after the message before a per-subject hole: %d items, oldest %v, %v", len(p2.Items), p2.Oldest, err)
	}
	// The first message superseded too: a reader after it is behind the stream's first
	// message now, and has lost nothing.
	publishRaw(t, js, "price.a", []byte(`5`)) // removes 1
	var p3 eventlog.Page
	testwait.Until(t, "the node sees the new message", func() bool {
		p3, err = s.Read(ctx, eventlog.Query{After: p.Items[0].Cursor, Max: 10, Ascending: true})
		return err != nil || p3.Newest.Seq == 5
	})
	if err != nil || len(p3.Items) != 3 || p3.Items[0].Cursor.Seq != 3 || p3.Oldest != p.Items[0].Cursor {
		t.Fatalf("behind the first message of a per-subject stream: %d items, oldest %v, %v", len(p3.Items), p3.Oldest, err)
	}
	if p4, err := s.Read(ctx, eventlog.Query{Max: 10, Ascending: true}); err != nil || p4.Oldest.Seq != 3 {
		t.Fatalf("from the start: oldest %v, %v; want the stream's first message", p4.Oldest, err)
	}
}
