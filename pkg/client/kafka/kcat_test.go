package kafka

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"testing"

	"github.com/evtctl/evtctl/pkg/client"
)

// kcat returns the path of Debian's kcat, an independent Kafka client, or skips the test.
func kcat(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat is not installed (apt-get install kcat): the test checks evtctl against it")
	}
	return p
}

// runKcat runs kcat with args and stdin, failing the test on error.
func runKcat(t *testing.T, stdin []byte, args ...string) []byte {
	t.Helper()
	cmd := exec.CommandContext(ctxT(t), kcat(t), args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kcat %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return out
}

// TestReadsKcatOpenEdXRecords: records written by kcat as the Open edX producer writes
// them are read attribute by attribute, the Avro value byte for byte.
func TestReadsKcatOpenEdXRecords(t *testing.T) {
	t.Parallel()
	kcat(t)
	k := newCluster(t)
	k.topic("oedx", 1)
	avro := []byte{0, 0, 0, 0, 7, 0x02, 0x12, 'l', 'e', 'a', 'r', 'n', 'e', 'r', '4', '2', 0xc8, 0x01, 0x00}
	runKcat(t, append(avro, '\n'), "-P", "-b", k.addr(), "-t", "oedx", "-p", "0", "-k", "course-v1:edX+DemoX",
		"-H", "ce_type=org.openedx.learning.course.enrollment.created.v1",
		"-H", "ce_id=0b43cb48-f01d-11ee-a1c2-0242ac120005",
		"-H", "ce_source=openedx/lms/web",
		"-H", "ce_specversion=1.0",
		"-H", "sourcehost=edx.devstack.lms",
		"-H", "content-type=application/avro",
		"-H", "ce_datacontenttype=application/avro")
	runKcat(t, []byte(`{"user": {"id": 4}}`+"\n"), "-P", "-b", k.addr(), "-t", "oedx", "-p", "0",
		"-H", "ce_type=org.openedx.content_authoring.course.catalog_info.changed.v1",
		"-H", "ce_id=11", "-H", "ce_source=openedx/cms/web", "-H", "ce_specversion=1.0",
		"-H", "ce_time=2026-02-03T04:05:06.123456+00:00", "-H", "minorversion=1", "-H", "sourcehost=cms-2",
		"-H", "ce_datacontenttype=application/json")
	s := k.source("oedx")
	p := page(t, s, client.PageRequest{Max: 10})
	if len(p.Items) != 2 {
		t.Fatalf("%d items", len(p.Items))
	}
	ev := eventOf(t, p.Items[0])
	want := map[string]any{
		"specversion": "1.0", "id": "0b43cb48-f01d-11ee-a1c2-0242ac120005", "source": "openedx/lms/web",
		"type": "org.openedx.learning.course.enrollment.created.v1", "datacontenttype": "application/avro",
		"sourcehost": "edx.devstack.lms", "data_base64": base64.StdEncoding.EncodeToString(avro),
	}
	if fmt.Sprint(ev) != fmt.Sprint(want) || p.Items[0].Cursor != "0/0" || p.Items[0].Event != want["type"] {
		t.Errorf("item %s\n got %v\nwant %v", p.Items[0].Cursor, ev, want)
	}
	ev = eventOf(t, p.Items[1])
	want = map[string]any{
		"specversion": "1.0", "id": "11", "source": "openedx/cms/web", "type": "org.openedx.content_authoring.course.catalog_info.changed.v1",
		"time": "2026-02-03T04:05:06.123456+00:00", "datacontenttype": "application/json", "minorversion": "1", "sourcehost": "cms-2",
		"data": map[string]any{"user": map[string]any{"id": float64(4)}},
	}
	if fmt.Sprint(ev) != fmt.Sprint(want) {
		t.Errorf("item %s\n got %v\nwant %v", p.Items[1].Cursor, ev, want)
	}
	if !strings.Contains(string(p.Items[1].Data), `"data":{"user": {"id": 4}}`) {
		t.Errorf("JSON data not kept as sent: %s", p.Items[1].Data)
	}
}

// kcatMessage is a record as kcat -J prints it.
type kcatMessage struct {
	Partition int32    `json:"partition"`
	Offset    int64    `json:"offset"`
	Headers   []string `json:"headers"`
	Key       *string  `json:"key"`
	Payload   *string  `json:"payload"`
}

// TestProducedReadByKcat: what Produce writes, kcat reads with every header as the Open edX
// producer sets it; and the source reads it back as the same event.
func TestProducedReadByKcat(t *testing.T) {
	t.Parallel()
	kcat(t)
	k := newCluster(t)
	k.topic("emit", 1)
	cfg, err := ParseURL("kafka://" + k.addr() + "/emit")
	if err != nil {
		t.Fatal(err)
	}
	events := []string{
		`{"specversion":"1.0","id":"e1","source":"openedx/lms/web","type":"org.openedx.learning.course.enrollment.created.v1","subject":"course-v1:edX+DemoX","time":"2026-01-02T03:04:05Z","datacontenttype":"application/json","minorversion":0,"pii":false,"sourcehost":"lms-1","data":{"user":{"id":7}}}`,
		`{"specversion":"1.0","id":"e2","source":"/s","type":"t.text","datacontenttype":"text/plain","data":"hello, world"}`,
		`{"specversion":"1.0","id":"e3","source":"/s","type":"t.none"}`,
	}
	i := 0
	next := func() ([]byte, int, error) {
		if i == len(events) {
			return nil, i, io.EOF
		}
		i++
		return []byte(events[i-1]), i, nil
	}
	var acks []Produced
	n, err := Produce(ctxT(t), cfg, ProduceOptions{}, next, func(p Produced) { acks = append(acks, p) })
	if err != nil || n != 3 || len(acks) != 3 {
		t.Fatalf("Produce = %d, %v; acks %v", n, err, acks)
	}
	for j, a := range acks {
		if a.N != j+1 || a.Cursor() != fmt.Sprintf("0/%d", j) || a.ID != fmt.Sprintf("e%d", j+1) {
			t.Errorf("ack %d: %+v", j, a)
		}
	}
	out := runKcat(t, nil, "-C", "-b", k.addr(), "-t", "emit", "-J", "-e", "-o", "beginning", "-q")
	var msgs []kcatMessage
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		var m kcatMessage
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("kcat line %q: %v", line, err)
		}
		msgs = append(msgs, m)
	}
	if len(msgs) != 3 {
		t.Fatalf("kcat read %d records", len(msgs))
	}
	wantHeaders := [][]string{
		{"ce_specversion", "1.0", "ce_id", "e1", "ce_source", "openedx/lms/web", "ce_type", "org.openedx.learning.course.enrollment.created.v1",
			"ce_subject", "course-v1:edX+DemoX", "ce_time", "2026-01-02T03:04:05Z", "ce_minorversion", "0", "ce_pii", "false",
			"sourcehost", "lms-1", "content-type", "application/json", "ce_datacontenttype", "application/json"},
		{"ce_specversion", "1.0", "ce_id", "e2", "ce_source", "/s", "ce_type", "t.text", "content-type", "text/plain", "ce_datacontenttype", "text/plain"},
		{"ce_specversion", "1.0", "ce_id", "e3", "ce_source", "/s", "ce_type", "t.none"},
	}
	wantPayload := []string{`{"user":{"id":7}}`, "hello, world", ""}
	for j, m := range msgs {
		if fmt.Sprint(m.Headers) != fmt.Sprint(wantHeaders[j]) {
			t.Errorf("record %d headers\n got %q\nwant %q", j, m.Headers, wantHeaders[j])
		}
		if m.Payload == nil || *m.Payload != wantPayload[j] {
			t.Errorf("record %d payload %v, want %q", j, m.Payload, wantPayload[j])
		}
	}
	if msgs[0].Key == nil || *msgs[0].Key != "course-v1:edX+DemoX" || msgs[1].Key != nil {
		t.Errorf("keys %v %v: want the subject, or none", msgs[0].Key, msgs[1].Key)
	}
	// Read back: the same events, extensions as strings (binary mode has no other type).
	p := page(t, k.source("emit"), client.PageRequest{Max: 10})
	wantBack := []string{
		`{"specversion":"1.0","id":"e1","source":"openedx/lms/web","type":"org.openedx.learning.course.enrollment.created.v1","subject":"course-v1:edX+DemoX","time":"2026-01-02T03:04:05Z","datacontenttype":"application/json","minorversion":"0","pii":"false","sourcehost":"lms-1","data":{"user":{"id":7}}}`,
		events[1], events[2],
	}
	for j, it := range p.Items {
		if string(it.Data) != wantBack[j] {
			t.Errorf("read back %d\n got %s\nwant %s", j, it.Data, wantBack[j])
		}
	}
}

func TestProduceRefusesInvalidEvents(t *testing.T) {
	t.Parallel()
	k := newCluster(t)
	k.topic("bad", 1)
	cfg, _ := ParseURL("kafka://" + k.addr() + "/bad")
	events := []string{`{"specversion":"1.0","id":"1","source":"/s","type":"t"}`, `{"specversion":"1.0","id":"","source":"/s","type":"t"}`}
	i := 0
	n, err := Produce(ctxT(t), cfg, ProduceOptions{}, func() ([]byte, int, error) {
		if i == len(events) {
			return nil, i, io.EOF
		}
		i++
		return []byte(events[i-1]), i, nil
	}, nil)
	var pe *ProduceError
	if n != 1 || !errorsAs(err, &pe) || !pe.Invalid || pe.N != 2 || Retryable(err) {
		t.Fatalf("Produce = %d, %v", n, err)
	}
	cfg.Topic = "nosuch"
	i = 0
	_, err = Produce(ctxT(t), cfg, ProduceOptions{}, func() ([]byte, int, error) {
		if i == 1 {
			return nil, i, io.EOF
		}
		i++
		return []byte(events[0]), i, nil
	}, nil)
	var te *TopicError
	if !errorsAs(err, &te) {
		t.Errorf("a topic that does not exist: %v (%T)", err, err)
	}
}
