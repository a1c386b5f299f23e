package kafka_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/evtctl/evtctl/pkg/client"
	"github.com/evtctl/evtctl/pkg/client/kafka"
	"github.com/evtctl/evtctl/pkg/render"
	"github.com/evtctl/evtctl/pkg/wire"
)

// TestMeasureRead compares, in one run, reading a topic of Open edX CloudEvents (binary
// mode, JSON data) to the end as JSON lines, written to io.Discard, three ways:
//
//   - evtctl: this package's forward pages, each item rendered as replay writes it;
//   - franz-go: a plain consumer of the same client library that writes each record's
//     value and a newline, unformatted;
//   - kcat -C -e -J (when installed), its output to /dev/null.
//
// Set EVTCTL_KAFKA_MEASURE to the number of records (1000000 for the figures in the
// README); EVTCTL_KAFKA_MEASURE_SIZE (default 600) is the bytes of each value,
// EVTCTL_KAFKA_MEASURE_ROUNDS (default 3) how often each reader reads it all (the best
// round counts), EVTCTL_KAFKA_MEASURE_PAGE (default 1000) the items a page holds;
// EVTCTL_KAFKA_MEASURE_ONLY=NAME keeps one reader (for a profile).
func TestMeasureRead(t *testing.T) {
	n := envInt(t, "EVTCTL_KAFKA_MEASURE", 0)
	if n <= 0 {
		t.Skip("set EVTCTL_KAFKA_MEASURE=1000000 to measure reading a topic")
	}
	size := envInt(t, "EVTCTL_KAFKA_MEASURE_SIZE", 600)
	rounds := envInt(t, "EVTCTL_KAFKA_MEASURE_ROUNDS", 3)
	pageMax := envInt(t, "EVTCTL_KAFKA_MEASURE_PAGE", 1000)
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "measure"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	t0 := time.Now()
	fillMeasure(t, addr, n, size)
	t.Logf("filled %d records of %d B in %v", n, size, time.Since(t0).Round(time.Millisecond))

	type reader struct {
		name string
		read func() (int, error) // records read
	}
	readers := []reader{
		{"evtctl", func() (int, error) { return readEvtctl(addr, pageMax) }},
		{"franz-go", func() (int, error) { return readPlain(addr, n) }},
	}
	if p, err := exec.LookPath("kcat"); err == nil {
		readers = append(readers, reader{"kcat -C -e -J", func() (int, error) {
			return n, runKcatDevNull(p, addr)
		}})
	} else {
		t.Log("kcat is not installed: measured without it")
	}
	if only := os.Getenv("EVTCTL_KAFKA_MEASURE_ONLY"); only != "" { // for profiling one of them
		readers = slices.DeleteFunc(readers, func(r reader) bool { return r.name != only })
	}
	best := make([]time.Duration, len(readers))
	bestCPU := make([]time.Duration, len(readers))
	for r := range rounds {
		for i, rd := range readers {
			start, cpu0 := time.Now(), cpuTime()
			got, err := rd.read()
			d, cpu := time.Since(start), cpuTime()-cpu0
			if err != nil {
				t.Fatalf("%s: %v", rd.name, err)
			}
			if got != n {
				t.Fatalf("%s read %d records, want %d", rd.name, got, n)
			}
			t.Logf("round %d: %-14s %8.0f records/s (%v), %.2f µs of CPU a record (broker included)",
				r+1, rd.name, float64(n)/d.Seconds(), d.Round(time.Millisecond), float64(cpu.Microseconds())/float64(n))
			if best[i] == 0 || d < best[i] {
				best[i] = d
			}
			if bestCPU[i] == 0 || cpu < bestCPU[i] {
				bestCPU[i] = cpu
			}
		}
	}
	for i, rd := range readers {
		t.Logf("best: %-14s %8.0f records/s, %.2f µs of CPU a record", rd.name, float64(n)/best[i].Seconds(), float64(bestCPU[i].Microseconds())/float64(n))
	}
	for i := 1; i < len(readers); i++ {
		t.Logf("evtctl / %s: %.2f by records a second, %.2f by CPU a record", readers[i].name,
			best[i].Seconds()/best[0].Seconds(), bestCPU[i].Seconds()/bestCPU[0].Seconds())
	}
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return n
}

// measureRecord is record i: an Open edX CloudEvent in binary mode with a JSON value of
// size bytes.
func measureRecord(i, size int) *kgo.Record {
	v := fmt.Appendf(nil, `{"user":{"id":%d,"is_active":true},"course":{"course_key":"course-v1:edX+DemoX+Demo_Course"},"mode":"audit","pad":"`, i)
	for len(v) < size-2 {
		v = append(v, 'x')
	}
	v = append(v, `"}`...)
	return &kgo.Record{
		Partition: int32(i % 3),
		Key:       fmt.Appendf(nil, "user-%d", i%1000),
		Value:     v,
		Headers: []kgo.RecordHeader{
			{Key: "ce_type", Value: []byte("org.openedx.learning.course.enrollment.created.v1")},
			{Key: "ce_id", Value: fmt.Appendf(nil, "b3b3981e-7544-11ea-b663-%012d", i)},
			{Key: "ce_source", Value: []byte("openedx/lms/web")},
			{Key: "ce_specversion", Value: []byte("1.0")},
			{Key: "ce_time", Value: []byte("2026-02-23T09:43:18.123456Z")},
			{Key: "sourcehost", Value: []byte("lms-1.example.com")},
			{Key: "content-type", Value: []byte("application/json")},
			{Key: "ce_datacontenttype", Value: []byte("application/json")},
		},
	}
}

func fillMeasure(t *testing.T, addr string, n, size int) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("measure"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond),
		kgo.MaxBufferedRecords(100000), kgo.ProducerBatchMaxBytes(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	errc := make(chan error, 1)
	for i := range n {
		cl.Produce(ctx, measureRecord(i, size), func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case errc <- err:
				default:
				}
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		t.Fatal(err)
	default:
	}
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, "measure")
	if err != nil {
		t.Fatal(err)
	}
	total := int64(0)
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	if total != int64(n) {
		t.Fatalf("the topic holds %d records, want %d", total, n)
	}
}

// readEvtctl reads the topic from its start in forward pages and renders each item as a
// JSON line.
func readEvtctl(addr string, pageMax int) (int, error) {
	cfg, err := kafka.ParseURL("kafka://" + addr + "/measure")
	if err != nil {
		return 0, err
	}
	s, err := kafka.New(cfg)
	if err != nil {
		return 0, err
	}
	defer s.Close()
	r, err := render.New(io.Discard, render.Options{Format: "jsonl"})
	if err != nil {
		return 0, err
	}
	ctx := context.Background()
	n, after := 0, ""
	for {
		p, err := s.Page(ctx, kafka.PageRequest{After: after, Max: pageMax, Reuse: true})
		if err != nil {
			return n, err
		}
		for _, it := range p.Items {
			if err := r.Item(client.Item{Item: wire.Item{Cursor: it.Cursor, Event: it.Event, Data: it.Data}, Raw: it.Raw}); err != nil {
				return n, err
			}
		}
		n += len(p.Items)
		after = p.Next
		if err := r.Flush(); err != nil {
			return n, err
		}
		p.Release() // written out
		if !p.More {
			return n, nil
		}
	}
}

// readPlain reads n records with a plain franz-go consumer, writing each value and a
// newline.
func readPlain(addr string, n int) (int, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"measure": {0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart(), 2: kgo.NewOffset().AtStart()}}))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	w := bufio.NewWriterSize(io.Discard, 64<<10)
	got := 0
	for got < n {
		fs := cl.PollFetches(context.Background())
		if errs := fs.Errors(); len(errs) > 0 {
			return got, errs[0].Err
		}
		fs.EachRecord(func(r *kgo.Record) {
			w.Write(r.Value)
			w.WriteByte('\n')
			got++
		})
	}
	return got, w.Flush()
}

func runKcatDevNull(kcat, addr string) error {
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer null.Close()
	cmd := exec.Command(kcat, "-C", "-b", addr, "-t", "measure", "-e", "-J", "-o", "beginning", "-q")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = null, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%v: %s", err, stderr.Bytes())
	}
	return nil
}

// BenchmarkItemOfRecord is the reader's work for one record of TestMeasureRead, without
// the broker: headers to CloudEvent to item to JSON line.
func BenchmarkItemOfRecord(b *testing.B) {
	recs := make([]*kgo.Record, 1024)
	for i := range recs {
		recs[i] = measureRecord(i, 600)
		recs[i].Offset = int64(i)
	}
	r, _ := render.New(io.Discard, render.Options{Format: "jsonl"})
	b.ReportAllocs()
	b.SetBytes(600)
	i := 0
	cpu0 := processCPU()
	for b.Loop() {
		it, ok := kafka.ItemOf(recs[i%len(recs)], "")
		if !ok {
			b.Fatal("no item")
		}
		if err := r.Item(client.Item{Item: wire.Item{Cursor: it.Cursor, Event: it.Event, Data: it.Data}, Raw: it.Raw}); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
}

// cpuTime is the CPU time of this process (the broker included) and of its ended children
// (kcat).
func cpuTime() time.Duration {
	var self, kids syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
	return time.Duration(self.Utime.Nano() + self.Stime.Nano() + kids.Utime.Nano() + kids.Stime.Nano())
}

// processCPU is the CPU time the process used, in nanoseconds: on a busy machine, what a
// benchmark costs, where its wall time also counts waiting for a core.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
