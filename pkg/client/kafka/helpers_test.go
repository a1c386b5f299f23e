package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/evtctl/evtctl/internal/testwait"
	"github.com/evtctl/evtctl/pkg/client"
)

// cluster is a Kafka-protocol broker in this process, on a loopback port.
type cluster struct {
	t   testing.TB
	c   *kfake.Cluster
	cl  *kgo.Client
	adm *kadm.Client
}

func newCluster(t testing.TB, opts ...kfake.Opt) *cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	k := &cluster{t: t, c: c}
	if !hasOpt(opts) {
		k.cl = k.client()
		k.adm = kadm.NewClient(k.cl)
	}
	return k
}

// hasOpt reports whether the cluster needs credentials (the helpers' own client then has none).
func hasOpt(opts []kfake.Opt) bool { return len(opts) > 0 }

func (k *cluster) client(opts ...kgo.Opt) *kgo.Client {
	k.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(k.c.ListenAddrs()...)}, opts...)...)
	if err != nil {
		k.t.Fatal(err)
	}
	k.t.Cleanup(cl.Close)
	return cl
}

func (k *cluster) addr() string { return strings.Join(k.c.ListenAddrs(), ",") }

// topic creates a topic of n partitions, with configs given as key, value pairs.
func (k *cluster) topic(name string, n int32, configs ...string) {
	k.t.Helper()
	cfg := map[string]*string{}
	for i := 0; i+1 < len(configs); i += 2 {
		cfg[configs[i]] = &configs[i+1]
	}
	resp, err := k.adm.CreateTopic(context.Background(), n, 1, cfg, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		k.t.Fatal(err)
	}
}

// produce writes records synchronously, each in a batch of its own.
func (k *cluster) produce(recs ...*kgo.Record) []*kgo.Record {
	k.t.Helper()
	for _, r := range recs {
		if err := k.cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			k.t.Fatal(err)
		}
	}
	return recs
}

// source opens a source of topic on the cluster.
func (k *cluster) source(topic string) *Source {
	k.t.Helper()
	cfg, err := ParseURL("kafka://" + k.addr() + "/" + topic)
	if err != nil {
		k.t.Fatal(err)
	}
	s, err := New(cfg)
	if err != nil {
		k.t.Fatal(err)
	}
	k.t.Cleanup(s.Close)
	return s
}

// oedxRecord is a record as the Open edX producer writes it, with JSON data for reading
// back, to partition p (-1: the partitioner's choice).
func oedxRecord(topic string, p int32, i int) *kgo.Record {
	return &kgo.Record{
		Topic:     topic,
		Partition: p,
		Key:       fmt.Appendf(nil, "user-%d", i%7),
		Value:     fmt.Appendf(nil, `{"n":%d,"user":{"id":%d}}`, i, i%7),
		Headers: []kgo.RecordHeader{
			{Key: "ce_type", Value: []byte("org.openedx.learning.course.enrollment.created.v1")},
			{Key: "ce_id", Value: fmt.Appendf(nil, "id-%d", i)},
			{Key: "ce_source", Value: []byte("openedx/lms/web")},
			{Key: "ce_specversion", Value: []byte("1.0")},
			{Key: "sourcehost", Value: []byte("lms-1.example.com")},
			{Key: "content-type", Value: []byte("application/json")},
			{Key: "ce_datacontenttype", Value: []byte("application/json")},
		},
	}
}

// manualPartitioner lets records name their partition.
func manualPartitioner() kgo.Opt { return kgo.RecordPartitioner(kgo.ManualPartitioner()) }

// page asks for a page and fails the test on error.
func page(t testing.TB, s *Source, r client.PageRequest) *client.Page {
	t.Helper()
	p, err := s.Page(ctxT(t), r)
	if err != nil {
		t.Fatalf("Page(%+v): %v", r, err)
	}
	return p
}

// eventOf decodes an item's CloudEvent.
func eventOf(t testing.TB, it client.Item) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(it.Data, &m); err != nil {
		t.Fatalf("item %s: data is not JSON: %v\n%s", it.Cursor, err, it.Data)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(it.Raw, &raw); err != nil {
		t.Fatalf("item %s: raw is not JSON: %v", it.Cursor, err)
	}
	var cur, ev string
	_ = json.Unmarshal(raw["cursor"], &cur)
	_ = json.Unmarshal(raw["event"], &ev)
	if cur != it.Cursor || ev != it.Event || string(raw["data"]) != string(it.Data) {
		t.Fatalf("item %s: raw %s does not hold cursor %q, event %q, data", it.Cursor, it.Raw, it.Cursor, it.Event)
	}
	return m
}

// ctxT ends at the test run's deadline.
func ctxT(t testing.TB) context.Context {
	ctx, cancel := testwait.Context(t, context.Background())
	t.Cleanup(cancel)
	return ctx
}

// kadmOffsets builds kadm.Offsets.
type kadmOffsets struct{ o kadm.Offsets }

func (k *kadmOffsets) add(topic string, p int32, at int64) {
	k.o.Add(kadm.Offset{Topic: topic, Partition: p, At: at, LeaderEpoch: -1})
}

func errorsAs(err error, target any) bool { return errors.As(err, target) }

func kadmClient(cl *kgo.Client) *kadm.Client { return kadm.NewClient(cl) }
