package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/tidwall/gjson"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

func init() { scriptCmds["kafka"] = cmdKafka }

// kafkaCluster is a script's Kafka-protocol broker (kfake), in the test process.
type kafkaCluster struct {
	c        *kfake.Cluster
	cl       *kgo.Client
	adm      *kadm.Client
	produced int // records kafka produce made, numbered on from one call to the next
}

// cmdKafka runs a Kafka-protocol broker in the test process on a loopback port and works
// with its topics:
//
//	kafka                              start it; KAFKA is its host:port
//	kafka topic NAME PARTITIONS [CONFIG=VALUE...]
//	kafka produce TOPIC N              N Open edX records (ce_id rec-I, data {"n":I}),
//	                                   record I to partition I % PARTITIONS, stamped a
//	                                   millisecond after record I-1; I counts on from the
//	                                   records made before
//	kafka drop TOPIC                   delete the topic
//	kafka delete TOPIC PARTITION OFFSET  delete the partition's records below OFFSET
//	kafka compact                      compact the compacted topics now
//	kafka once FILE TOPIC              FILE's JSON lines hold every record of TOPIC exactly
//	                                   once, each partition's in offset order
//	kafka delivered LOG TOPIC          a receiver's LOG (see receiver): every record of TOPIC
//	                                   answered 2xx at least once, the first of them in each
//	                                   partition's order
func cmdKafka(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("unsupported: ! kafka")
	}
	if len(args) == 0 {
		c, err := kfake.NewCluster(kfake.NumBrokers(1))
		ts.Check(err)
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			c.Close()
			ts.Fatalf("kafka: %v", err)
		}
		k := &kafkaCluster{c: c, cl: cl, adm: kadm.NewClient(cl)}
		clusters.put(ts, k)
		ts.Setenv("KAFKA", c.ListenAddrs()[0])
		ts.Defer(func() {
			clusters.drop(ts)
			cl.Close()
			c.Close()
		})
		return
	}
	k := clusters.get(ts)
	if k == nil {
		ts.Fatalf("kafka %s: start the broker first (kafka)", args[0])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	switch args[0] {
	case "topic":
		if len(args) < 3 {
			ts.Fatalf("usage: kafka topic NAME PARTITIONS [CONFIG=VALUE...]")
		}
		n, err := strconv.Atoi(args[2])
		ts.Check(err)
		cfg := map[string]*string{}
		for _, kv := range args[3:] {
			key, v, _ := strings.Cut(kv, "=")
			cfg[key] = &v
		}
		resp, err := k.adm.CreateTopic(ctx, int32(n), 1, cfg, args[1])
		if err == nil {
			err = resp.Err
		}
		ts.Check(err)
	case "produce":
		if len(args) != 3 {
			ts.Fatalf("usage: kafka produce TOPIC N")
		}
		n, err := strconv.Atoi(args[2])
		ts.Check(err)
		parts := k.partitions(ts, ctx, args[1])
		var recs []*kgo.Record
		base := time.Now().Truncate(time.Millisecond)
		for i := k.produced; i < k.produced+n; i++ {
			recs = append(recs, &kgo.Record{
				Topic: args[1], Partition: int32(i % parts), Key: fmt.Appendf(nil, "learner-%d", i%5),
				Timestamp: base.Add(time.Duration(i-k.produced) * time.Millisecond), // read in this order
				Value:     fmt.Appendf(nil, `{"n":%d}`, i),
				Headers: []kgo.RecordHeader{
					{Key: "ce_type", Value: []byte("org.openedx.learning.course.enrollment.created.v1")},
					{Key: "ce_id", Value: fmt.Appendf(nil, "rec-%d", i)},
					{Key: "ce_source", Value: []byte("openedx/lms/web")},
					{Key: "ce_specversion", Value: []byte("1.0")},
					{Key: "sourcehost", Value: []byte("lms-1.example.com")},
					{Key: "content-type", Value: []byte("application/json")},
					{Key: "ce_datacontenttype", Value: []byte("application/json")},
				},
			})
		}
		ts.Check(k.cl.ProduceSync(ctx, recs...).FirstErr())
		k.produced += n
	case "drop":
		if len(args) != 2 {
			ts.Fatalf("usage: kafka drop TOPIC")
		}
		resp, err := k.adm.DeleteTopics(ctx, args[1])
		ts.Check(err)
		ts.Check(resp.Error())
	case "delete":
		if len(args) != 4 {
			ts.Fatalf("usage: kafka delete TOPIC PARTITION OFFSET")
		}
		p, err := strconv.Atoi(args[2])
		ts.Check(err)
		o, err := strconv.ParseInt(args[3], 10, 64)
		ts.Check(err)
		var os kadm.Offsets
		os.Add(kadm.Offset{Topic: args[1], Partition: int32(p), At: o, LeaderEpoch: -1})
		resp, err := k.adm.DeleteRecords(ctx, os)
		ts.Check(err)
		ts.Check(resp.Error())
	case "compact":
		k.c.Compact()
	case "once":
		if len(args) != 3 {
			ts.Fatalf("usage: kafka once FILE TOPIC")
		}
		ends := k.ends(ts, ctx, args[2])
		next := make([]int64, len(ends))
		for i, line := range jsonLines(ts, args[1]) {
			p, o := cursorOf(ts, gjson.Get(line, "cursor").String(), i+1)
			if int(p) >= len(next) || o != next[p] {
				ts.Fatalf("line %d: record %d/%d after %d/%d: out of order, repeated or skipped", i+1, p, o, p, next[min(int(p), len(next)-1)]-1)
			}
			next[p]++
		}
		for p, n := range next {
			if n != ends[p] {
				ts.Fatalf("partition %d: %d records written, the partition holds %d", p, n, ends[p])
			}
		}
		fmt.Fprintf(ts.Stdout(), "%d records, each once, in partition order\n", sum(next))
	case "delivered":
		if len(args) != 3 {
			ts.Fatalf("usage: kafka delivered LOG TOPIC")
		}
		at := k.recordsByID(ts, ctx, args[2])
		last := map[int64]int64{}
		seen := map[string]bool{}
		dups := 0
		for i, line := range jsonLines(ts, args[1]) {
			var l recvLine
			ts.Check(json.Unmarshal([]byte(line), &l))
			if l.Status < 200 || l.Status > 299 {
				continue
			}
			if seen[l.ID] {
				dups++
				continue
			}
			seen[l.ID] = true
			c, ok := at[l.ID]
			if !ok {
				ts.Fatalf("line %d: event %s is no record of the topic", i+1, l.ID)
			}
			if prev, ok := last[c[0]]; ok && c[1] <= prev {
				ts.Fatalf("line %d: record %d/%d delivered first after %d/%d: out of partition order", i+1, c[0], c[1], c[0], prev)
			}
			last[c[0]] = c[1]
		}
		if len(seen) != len(at) {
			ts.Fatalf("%d of the topic's %d records delivered", len(seen), len(at))
		}
		fmt.Fprintf(ts.Stdout(), "%d records delivered, in partition order; %d repeats\n", len(seen), dups)
	default:
		ts.Fatalf("kafka: unknown subcommand %s", args[0])
	}
}

// clusters are the running scripts' brokers, by script (a command cannot store a value in
// its script).
var clusters = clusterMap{m: map[*testscript.TestScript]*kafkaCluster{}}

type clusterMap struct {
	mu sync.Mutex
	m  map[*testscript.TestScript]*kafkaCluster
}

func (c *clusterMap) put(ts *testscript.TestScript, k *kafkaCluster) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m[ts] != nil {
		ts.Fatalf("kafka: the broker runs already")
	}
	c.m[ts] = k
}

func (c *clusterMap) get(ts *testscript.TestScript) *kafkaCluster {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[ts]
}

func (c *clusterMap) drop(ts *testscript.TestScript) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, ts)
}

func (k *kafkaCluster) partitions(ts *testscript.TestScript, ctx context.Context, topic string) int {
	tds, err := k.adm.ListTopics(ctx, topic)
	ts.Check(err)
	td, ok := tds[topic]
	if !ok || td.Err != nil || len(td.Partitions) == 0 {
		ts.Fatalf("kafka: no topic %s", topic)
	}
	return len(td.Partitions)
}

// ends are the partitions' end offsets.
func (k *kafkaCluster) ends(ts *testscript.TestScript, ctx context.Context, topic string) []int64 {
	n := k.partitions(ts, ctx, topic)
	l, err := k.adm.ListEndOffsets(ctx, topic)
	ts.Check(err)
	ends := make([]int64, n)
	for p := range ends {
		o, ok := l.Lookup(topic, int32(p))
		if !ok || o.Err != nil {
			ts.Fatalf("kafka: no end offset of partition %d", p)
		}
		ends[p] = o.Offset
	}
	return ends
}

// recordsByID reads the whole topic: each record's partition and offset by its ce_id.
func (k *kafkaCluster) recordsByID(ts *testscript.TestScript, ctx context.Context, topic string) map[string][2]int64 {
	ends := k.ends(ts, ctx, topic)
	start := map[int32]kgo.Offset{}
	for p := range ends {
		start[int32(p)] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.c.ListenAddrs()...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: start}))
	ts.Check(err)
	defer cl.Close()
	at := map[string][2]int64{}
	next := make([]int64, len(ends))
	for !done(next, ends) {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			ts.Fatalf("kafka: reading %s: %v", topic, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			for _, h := range r.Headers {
				if h.Key == "ce_id" {
					at[string(h.Value)] = [2]int64{int64(r.Partition), r.Offset}
				}
			}
			next[r.Partition] = r.Offset + 1
		})
	}
	return at
}

func done(next, ends []int64) bool {
	for p := range next {
		if next[p] < ends[p] {
			return false
		}
	}
	return true
}

func sum(v []int64) int64 {
	n := int64(0)
	for _, x := range v {
		n += x
	}
	return n
}

// cursorOf reads a Kafka item's cursor PARTITION/OFFSET.
func cursorOf(ts *testscript.TestScript, c string, line int) (int32, int64) {
	ps, os, ok := strings.Cut(c, "/")
	p, err1 := strconv.ParseInt(ps, 10, 32)
	o, err2 := strconv.ParseInt(os, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		ts.Fatalf("line %d: %q is no Kafka cursor", line, c)
	}
	return int32(p), o
}

// jsonLines are the lines of a file in the script's directory.
func jsonLines(ts *testscript.TestScript, name string) []string {
	f, err := os.Open(ts.MkAbs(name))
	ts.Check(err)
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" {
			lines = append(lines, line)
		}
	}
	ts.Check(sc.Err())
	return lines
}

// TestInteractiveKafkaTmux runs evtctl tail -i on a Kafka topic in a tmux session and
// checks the screen, as testdata/tmux/kafka_interactive.sh says: the topic's newest events
// live, new records as they come, older pages down to the first record.
func TestInteractiveKafkaTmux(t *testing.T) {
	t.Parallel()
	needTmux(t)
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "seeded"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	base := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	var recs []*kgo.Record
	for i := 1; i <= 300; i++ {
		recs = append(recs, &kgo.Record{
			Topic: "seeded", Partition: int32(i % 3), Timestamp: base.Add(time.Duration(i) * time.Millisecond),
			Value: fmt.Appendf(nil, `{"n":%d}`, i),
			Headers: []kgo.RecordHeader{
				{Key: "ce_type", Value: []byte("org.example.tmux.seeded.v1")},
				{Key: "ce_id", Value: fmt.Appendf(nil, "seed-%d", i)},
				{Key: "ce_source", Value: []byte("/tmux")},
				{Key: "ce_specversion", Value: []byte("1.0")},
				{Key: "ce_subject", Value: fmt.Appendf(nil, "seed-%d", i)},
				{Key: "content-type", Value: []byte("application/json")},
			},
		})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	runTmuxScript(t, "kafka_interactive.sh", "TOPIC=kafka://"+c.ListenAddrs()[0]+"/seeded")
}
