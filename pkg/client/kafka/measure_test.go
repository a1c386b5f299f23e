package kafka_test

import (
	"bufio"
	"context"
	"io"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/evtctl/evtctl/internal/kafkatest"
	"github.com/evtctl/evtctl/pkg/client"
	"github.com/evtctl/evtctl/pkg/client/kafka"
	"github.com/evtctl/evtctl/pkg/render"
)

// BenchmarkRead reads a topic of Open edX CloudEvents (binary mode, JSON data, 3
// partitions) from its start to its end, in this process, against a Kafka-protocol broker
// (kfake) in this process too, two ways, each iteration the whole topic:
//
//   - evtctl: this package's forward pages, each item rendered as replay -o jsonl writes
//     it, to io.Discard;
//   - franz-go: a plain consumer of the same client library that writes each record's
//     value and a newline, unformatted.
//
// It is for profiling the reader (-cpuprofile, -memprofile); the whole command is measured
// against these and kcat by BenchmarkKafkaReplay in cmd/evtctl. EVTCTL_KAFKA_BENCH_RECORDS
// (default 200000) is the topic's records, EVTCTL_KAFKA_BENCH_SIZE (default 600) a value's
// bytes, EVTCTL_KAFKA_BENCH_PAGE (default 1000) the items a page holds:
//
//	go test -run '^$' -bench 'Read/evtctl' -benchtime 3x -cpuprofile cpu.out ./pkg/client/kafka/
func BenchmarkRead(b *testing.B) {
	n := kafkatest.Env(b, "EVTCTL_KAFKA_BENCH_RECORDS", 200_000)
	size := kafkatest.Env(b, "EVTCTL_KAFKA_BENCH_SIZE", 600)
	pageMax := kafkatest.Env(b, "EVTCTL_KAFKA_BENCH_PAGE", 1000)
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "measure"))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	if err := kafkatest.Fill(context.Background(), addr, "measure", n, size, 3); err != nil {
		b.Fatal(err)
	}
	for _, rd := range []struct {
		name string
		read func() (int, error) // records read
	}{
		{"evtctl", func() (int, error) { return readEvtctl(addr, pageMax) }},
		{"franz-go", func() (int, error) { return readPlain(addr, n) }},
	} {
		b.Run(rd.name, func(b *testing.B) {
			cpu0 := processCPU()
			for b.Loop() {
				got, err := rd.read()
				if err != nil {
					b.Fatal(err)
				}
				if got != n {
					b.Fatalf("read %d records, want %d", got, n)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
			b.ReportMetric(float64(processCPU()-cpu0)/float64(n)/float64(b.N), "cpu-ns/record")
		})
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
		p, err := s.Page(ctx, client.PageRequest{After: after, Max: pageMax, Reuse: true})
		if err != nil {
			return n, err
		}
		if err := r.Items(p.Items); err != nil {
			return n, err
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
	w := bufio.NewWriterSize(io.Discard, 64<<10)
	got := 0
	err := kafkatest.ConsumePlain(context.Background(), addr, "measure", n, 3, func(v []byte) {
		w.Write(v)
		w.WriteByte('\n')
		got++
	})
	if err != nil {
		return got, err
	}
	return got, w.Flush()
}

// BenchmarkItemOfRecord is the reader's work for one record of BenchmarkRead, without
// the broker: headers to CloudEvent to item to JSON line.
func BenchmarkItemOfRecord(b *testing.B) {
	recs := make([]*kgo.Record, 1024)
	for i := range recs {
		recs[i] = kafkatest.Record(i, 600, 3)
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
		if err := r.Item(it); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
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
