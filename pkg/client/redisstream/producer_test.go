package redisstream

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/evtctl/evtctl/pkg/client"
)

func TestEntryFields(t *testing.T) {
	ev := `{"specversion":"1.0","id":"5e9f","source":"openedx/lms/web","type":"org.openedx.learning.course.enrollment.created.v1",` +
		`"time":"2026-11-22T10:00:00Z","subject":"course-v1:edX+Demo","minorversion":0,"pii":true,"sourcelib":"9.5.1","sourcehost":"lms-1","datacontenttype":"application/json","data":{"user":7}}`
	got, err := EntryFields([]byte(ev))
	if err != nil {
		t.Fatal(err)
	}
	want := []any{"type", "org.openedx.learning.course.enrollment.created.v1", "id", "5e9f", "source", "openedx/lms/web", "time", "2026-11-22T10:00:00Z",
		"minorversion", "0", "sourcehost", "lms-1", "sourcelib", "9.5.1", "datacontenttype", "application/json", "pii", "true", "subject", "course-v1:edX+Demo",
		"event_data", []byte(`{"user":7}`)}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
}

// TestProducerRoundTrip: events written as entries read back as the same events, attribute
// by attribute (extensions as strings, as entries hold them).
func TestProducerRoundTrip(t *testing.T) {
	t.Parallel()
	s := newStream(t)
	p, err := NewProducer(s.srv.URL(s.key), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	events := [][]byte{
		[]byte(`{"specversion":"1.0","id":"a","source":"openedx/lms/web","type":"org.openedx.x.v1","time":"2026-11-22T10:00:00Z","minorversion":"0","data":{"n":1}}`),
		[]byte(`{"specversion":"1.0","id":"b","source":"/s","type":"t","data_base64":"AP8A"}`),
		[]byte(`{"specversion":"1.0","id":"c","source":"/s","type":"t","datacontenttype":"text/plain","data":"line\nline"}`),
		[]byte(`{"specversion":"1.0","id":"d","source":"/s","type":"t"}`),
	}
	ids, err := p.Send(context.Background(), events)
	if err != nil || len(ids) != len(events) {
		t.Fatalf("%v %v", ids, err)
	}
	page, err := s.client().Page(context.Background(), client.PageRequest{Max: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != len(events) {
		t.Fatalf("%d items", len(page.Items))
	}
	for i, it := range page.Items {
		var got, want map[string]any
		json.Unmarshal(it.Data, &got)
		json.Unmarshal(events[i], &want)
		if it.Cursor != ids[i] || !reflect.DeepEqual(got, want) {
			t.Errorf("entry %s: %s, want %s", it.Cursor, it.Data, events[i])
		}
	}

	// Refused before anything is sent.
	_, err = p.Send(context.Background(), [][]byte{events[0], []byte(`{"id":{"x":1}}`)})
	if err == nil || !strings.Contains(err.Error(), "event 1 cannot be a stream entry") {
		t.Fatalf("%v", err)
	}
	s.do("SET", "plain", "x")
	q, _ := NewProducer("redis://"+s.srv.Addr+"/0/plain", client.Options{})
	defer q.Close()
	ids, err = q.Send(context.Background(), events[:2])
	if err == nil || client.Retryable(err) || fmt.Sprint(ids) != "[ ]" {
		t.Fatalf("%q %v", ids, err)
	}
}
