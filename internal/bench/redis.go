package bench

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/tidwall/gjson"

	"github.com/evtctl/evtctl/internal/retry"
	"github.com/evtctl/evtctl/pkg/client"
	"github.com/evtctl/evtctl/pkg/client/redisstream"
	"github.com/evtctl/evtctl/pkg/render"
)

// Goals of a Redis stream's reader.
const (
	// GoalRedisReplayRatio: a replay through evtctl runs at least this share of a plain
	// go-redis XRANGE pager's rate over the same entries, in the same run.
	GoalRedisReplayRatio = 0.8
	// GoalRedisTailP99Ms: XADD to the entry written out, at 1,000 entries/s on loopback.
	GoalRedisTailP99Ms = 5
)

// RedisConfig configures Redis.
type RedisConfig struct {
	Version  string
	Progress func(line string)

	Stream  string         // the stream's address, redis://HOST:PORT/DB/KEY
	Options client.Options // its password and TLS settings
	// Entries are added to the stream first, as the Open edX event bus writes them, each
	// EntrySize bytes of field names and values (event_data random bytes, as Avro would
	// be); the key must not exist then, and is deleted afterwards unless Keep. 0 measures
	// the stream as it is.
	Entries   int
	EntrySize int
	Keep      bool
	PageSize  int // entries per XRANGE, both sides; default 1000 (as evtctl replay)
	Runs      int // replays of each side, alternating; medians are reported
	// The tail's latency: Rate entries a second added for Duration to the key KEY:latency
	// (deleted afterwards) while evtctl's tail path follows it. Duration 0 skips it.
	Rate     float64
	Duration time.Duration
}

// DefaultRedisEntrySize is the size of an entry's fields in bench redis: the Open edX
// event bus's fields and an Avro payload of some 450 bytes.
const DefaultRedisEntrySize = 600

// MinRedisEntrySize is the size of the field names and values of a bench entry other than
// its payload, which is at least one byte.
const MinRedisEntrySize = len("type") + len("org.openedx.learning.course.enrollment.created.v1") + len("id") + 36 + len("source") + len("openedx/lms/web") +
	len("time") + len("2026-11-22T10:00:00.123456+00:00") + len("minorversion") + 1 + len("sourcehost") + len("lms-7d9c5b6f4-x2k8q") +
	len("sourcelib") + len("9.5.1") + len("event_data")

// Redis measures evtctl's reader of a Redis stream beside go-redis, against one server, in
// one run:
//
//   - replay: a plain go-redis pager (XRANGE ... COUNT PageSize, the entries' ids and
//     fields written unformatted) and evtctl's replay path (client.Range, each entry a
//     CloudEvent written as a JSON line, as evtctl replay -o jsonl does), both to the null
//     device, alternating, Runs times; events per second and evtctl's share of the pager's;
//   - latency: entries added one at a time at Rate while evtctl's tail path (client.Stream,
//     XREAD BLOCK at the head, each batch written and flushed to the null device) follows
//     the stream; the time from just before each XADD to its entry written out.
func Redis(ctx context.Context, cfg RedisConfig) (*Report, error) {
	if cfg.EntrySize <= 0 {
		cfg.EntrySize = DefaultRedisEntrySize
	}
	if cfg.EntrySize <= MinRedisEntrySize {
		return nil, fmt.Errorf("entries of %d bytes: an entry's fields take %d bytes before its payload", cfg.EntrySize, MinRedisEntrySize)
	}
	if cfg.PageSize <= 0 {
		cfg.PageSize = 1000
	}
	if cfg.Runs <= 0 {
		cfg.Runs = 1
	}
	if cfg.Rate <= 0 {
		cfg.Rate = 1000
	}
	progress := func(format string, args ...any) {
		if cfg.Progress != nil {
			cfg.Progress(fmt.Sprintf(format, args...))
		}
	}
	addr, err := redisstream.ParseAddress(cfg.Stream)
	if err != nil {
		return nil, err
	}
	r := &Report{Bench: "redis", Env: Environment{
		EvtctlVersion: cfg.Version, GoVersion: runtime.Version(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH,
		CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), NodeURL: addr.String(), NodeKind: "redis",
		Started: time.Now().UTC().Truncate(time.Millisecond), LoadBefore: loadAverage(),
	}}
	rdb, err := plainClient(addr, cfg.Options)
	if err != nil {
		return nil, err
	}
	defer rdb.Close()
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", addr, err)
	}
	r.Env.NodeVersion = "redis-server " + infoField(info, "redis_version")
	r.param("entries", cfg.Entries, "entries")
	if cfg.Entries > 0 {
		r.param("entry_size", cfg.EntrySize, "bytes")
	}
	r.param("page_size", cfg.PageSize, "entries")
	r.param("runs", cfg.Runs, "runs")

	key := addr.Stream
	if cfg.Entries > 0 {
		n, err := rdb.Exists(ctx, key).Result()
		if err != nil {
			return nil, err
		}
		if n > 0 {
			return nil, fmt.Errorf("key %q exists on %s: bench redis --entries fills a new stream (give another key, or --entries 0 to replay this one)", key, addr.Host)
		}
		if !cfg.Keep {
			defer rdb.Del(context.WithoutCancel(ctx), key)
		}
		t0 := time.Now()
		if err := FillRedisStream(ctx, rdb, key, cfg.Entries, cfg.EntrySize, progress); err != nil {
			return partial(ctx, r, fmt.Errorf("adding %d entries: %w", cfg.Entries, err))
		}
		r.figure("load_entries_per_second", float64(cfg.Entries)/max(time.Since(t0).Seconds(), 1e-9), "entries/s")
	}
	length, err := rdb.XLen(ctx, key).Result()
	if err != nil {
		return nil, err
	}
	if length == 0 {
		return nil, fmt.Errorf("stream %q holds no entries on %s: nothing to replay (--entries N fills a new one)", key, addr.Host)
	}
	c, err := client.New(client.Options{Node: cfg.Stream, Token: cfg.Options.Token, CAFile: cfg.Options.CAFile, Insecure: cfg.Options.Insecure})
	if err != nil {
		return nil, err
	}

	var raw, ev, ratio, cpuRaw, cpuEv []float64
	for run := 1; run <= cfg.Runs && ctx.Err() == nil; run++ {
		// Alternate which side goes first, so that neither always finds the server warm.
		sides := []string{"go-redis", "evtctl"}
		if run%2 == 0 {
			sides[0], sides[1] = sides[1], sides[0]
		}
		var rates [2]float64
		for _, side := range sides {
			progress("redis: run %d of %d, replay through %s", run, cfg.Runs, side)
			c0, cpuOK := processCPU()
			t0 := time.Now()
			var n int64
			if side == "go-redis" {
				n, err = plainReplay(ctx, rdb, key, cfg.PageSize)
			} else {
				n, err = evtctlReplay(ctx, c, cfg.PageSize)
			}
			d := time.Since(t0)
			c1, _ := processCPU()
			if err != nil {
				return partial(ctx, r, fmt.Errorf("replay through %s: %w", side, err))
			}
			if n != length {
				return nil, fmt.Errorf("replay through %s wrote %d entries; the stream holds %d", side, n, length)
			}
			rate := float64(n) / max(d.Seconds(), 1e-9)
			cpu := 0.0
			if cpuOK && n > 0 {
				cpu = float64(c1-c0) / float64(time.Microsecond) / float64(n)
			}
			if side == "go-redis" {
				raw, cpuRaw, rates[0] = append(raw, rate), append(cpuRaw, cpu), rate
			} else {
				ev, cpuEv, rates[1] = append(ev, rate), append(cpuEv, cpu), rate
			}
		}
		ratio = append(ratio, rates[1]/max(rates[0], 1e-9))
	}
	if len(ratio) > 0 {
		r.figure("goredis_events_per_second", median(raw), "events/s")
		r.figure("evtctl_events_per_second", median(ev), "events/s")
		r.goal("evtctl_share_of_goredis", median(ratio), "ratio", ">=", GoalRedisReplayRatio)
		r.figure("goredis_cpu_per_event", median(cpuRaw), "µs")
		r.figure("evtctl_cpu_per_event", median(cpuEv), "µs")
		r.note("the share is the median of each run's evtctl rate over the go-redis pager's rate in that run; both write to the null device")
	}
	if cfg.Duration > 0 && ctx.Err() == nil {
		if err := redisLatency(ctx, r, rdb, cfg, progress); err != nil {
			return partial(ctx, r, err)
		}
	}
	r.finish(ctx)
	return r, ctx.Err()
}

// plainClient is a go-redis client of addr's server, as a program would make one.
func plainClient(a redisstream.Address, o client.Options) (*redis.Client, error) {
	ro := &redis.Options{Addr: a.Host, Username: a.User, Password: a.Password, DB: a.DB, DisableIdentity: true}
	if ro.Password == "" {
		ro.Password = o.Token
	}
	if a.TLS {
		cfg, err := client.TLSConfig(o.CAFile, o.Insecure)
		if err != nil {
			return nil, err
		}
		ro.TLSConfig = cfg
	}
	return redis.NewClient(ro), nil
}

// infoField is a field of INFO's answer ("unknown" when it has none).
func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return "unknown"
}

// FillRedisStream adds n entries as the Open edX event bus writes them, each size bytes of
// field names and values (above MinRedisEntrySize), in pipelines of 1,000; progress, when
// set, is told every 100,000.
func FillRedisStream(ctx context.Context, rdb *redis.Client, key string, n, size int, progress func(string, ...any)) error {
	data := make([]byte, max(size-MinRedisEntrySize, 1))
	for i := range data {
		data[i] = byte(i*131 + 7) // not JSON: data_base64, as Avro is
	}
	data[0] = 0
	for start := 0; start < n && ctx.Err() == nil; start += 1000 {
		p := rdb.Pipeline()
		for i := start; i < min(n, start+1000); i++ {
			p.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: []any{
				"type", "org.openedx.learning.course.enrollment.created.v1", "id", fmt.Sprintf("5e9f5a4c-c8b1-11ee-a506-%012d", i),
				"source", "openedx/lms/web", "time", "2026-11-22T10:00:00.123456+00:00", "minorversion", "0",
				"sourcehost", "lms-7d9c5b6f4-x2k8q", "sourcelib", "9.5.1", "event_data", data}})
		}
		if _, err := p.Exec(ctx); err != nil {
			return err
		}
		if start%100_000 == 0 && progress != nil {
			progress("redis: %d of %d entries added", start, n)
		}
	}
	return ctx.Err()
}

// devNull is the null device, opened for writing: where both replays write.
func devNull() (*os.File, error) { return os.OpenFile(os.DevNull, os.O_WRONLY, 0) }

// plainReplay pages through the stream with go-redis's XRANGE and writes each entry's id
// and fields unformatted.
func plainReplay(ctx context.Context, rdb *redis.Client, key string, pageSize int) (int64, error) {
	f, err := devNull()
	if err != nil {
		return 0, err
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 64<<10)
	start := "-"
	var n int64
	for {
		msgs, err := rdb.XRangeN(ctx, key, start, "+", int64(pageSize)).Result()
		if err != nil {
			return n, err
		}
		for _, m := range msgs {
			w.WriteString(m.ID)
			for k, v := range m.Values {
				w.WriteString(k)
				if s, ok := v.(string); ok {
					w.WriteString(s)
				}
			}
			w.WriteByte('\n')
		}
		n += int64(len(msgs))
		if len(msgs) < pageSize {
			return n, w.Flush()
		}
		start = "(" + msgs[len(msgs)-1].ID
	}
}

// evtctlReplay is evtctl replay -o jsonl to the null device.
func evtctlReplay(ctx context.Context, c *client.Client, pageSize int) (int64, error) {
	f, err := devNull()
	if err != nil {
		return 0, err
	}
	defer f.Close()
	rd, err := render.New(f, render.Options{Format: "jsonl"})
	if err != nil {
		return 0, err
	}
	var n int64
	err = c.Range(ctx, client.RangeOptions{PageSize: pageSize, ReuseMemory: true}, func(items []client.Item) error {
		n += int64(len(items))
		if err := rd.Items(items); err != nil {
			return err
		}
		return rd.Flush()
	})
	return n, err
}

// redisLatency adds entries one at a time at cfg.Rate to KEY:latency while evtctl's tail
// path follows it, and reports the time from each XADD's start to its entry written out.
func redisLatency(ctx context.Context, r *Report, rdb *redis.Client, cfg RedisConfig, progress func(string, ...any)) error {
	addr, _ := redisstream.ParseAddress(cfg.Stream)
	key := addr.Stream + ":latency"
	n, err := rdb.Exists(ctx, key).Result()
	if err != nil {
		return err
	}
	if n > 0 {
		return fmt.Errorf("key %q exists on %s: the latency bench adds entries to a new stream", key, addr.Host)
	}
	defer rdb.Del(context.WithoutCancel(ctx), key)
	lat := addr
	lat.Stream = key
	c, err := client.New(client.Options{Node: lat.String(), Token: cmp.Or(addr.Password, cfg.Options.Token), CAFile: cfg.Options.CAFile, Insecure: cfg.Options.Insecure})
	if err != nil {
		return err
	}
	total := max(int(cfg.Rate*cfg.Duration.Seconds()), 1)
	warm := total / 10
	r.param("rate", cfg.Rate, "entries/s")
	r.param("duration", cfg.Duration, "s")
	sent := make([]int64, total+warm+1)
	recv := make([]int64, total+warm+1)
	var mu sync.Mutex
	got := make(chan struct{}, 1)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	tailErr := make(chan error, 1)
	go func() {
		f, err := devNull()
		if err != nil {
			tailErr <- err
			return
		}
		defer f.Close()
		rd, err := render.New(f, render.Options{Format: "jsonl"})
		if err != nil {
			tailErr <- err
			return
		}
		var seqs []int
		// As evtctl tail: from the head (the stream is new), 100 a page, a 25 s long-poll.
		tailErr <- c.Stream(runCtx, client.StreamOptions{FromStart: true, PageSize: 100, Wait: 25 * time.Second, ReuseMemory: true}, func(b client.Batch) error {
			seqs = seqs[:0]
			for _, it := range b.Items {
				if err := rd.Item(it); err != nil {
					return err
				}
				if s, err := strconv.Atoi(gjson.GetBytes(it.Data, "id").Str); err == nil && s > 0 && s < len(recv) {
					seqs = append(seqs, s)
				}
			}
			if err := rd.Flush(); err != nil {
				return err
			}
			now := time.Now().UnixNano()
			mu.Lock()
			for _, s := range seqs {
				recv[s] = now
			}
			mu.Unlock()
			select {
			case got <- struct{}{}:
			default:
			}
			return nil
		})
	}()
	interval := time.Duration(float64(time.Second) / cfg.Rate)
	start := time.Now()
	for seq := 1; seq <= total+warm && ctx.Err() == nil; seq++ {
		if wait := time.Until(start.Add(time.Duration(seq-1) * interval)); wait > 0 && retry.Sleep(ctx, wait) != nil {
			break
		}
		t0 := time.Now().UnixNano()
		if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: []any{"type", "org.example.bench.latency.v1", "id", strconv.Itoa(seq), "source", "/bench",
			"time", time.Now().UTC().Format(time.RFC3339Nano), "event_data", `{"n":1}`}}).Err(); err != nil {
			return err
		}
		mu.Lock()
		sent[seq] = t0
		mu.Unlock()
		if seq%1000 == 0 {
			progress("redis: latency, %d of %d entries added", seq, total+warm)
		}
	}
	sendElapsed := time.Since(start)
	deadline := time.After(10 * time.Second)
	for {
		mu.Lock()
		missing := 0
		for s := 1; s <= total+warm; s++ {
			if sent[s] != 0 && recv[s] == 0 {
				missing++
			}
		}
		mu.Unlock()
		if missing == 0 || ctx.Err() != nil {
			break
		}
		select {
		case <-got:
		case <-deadline:
			return fmt.Errorf("%d entries never reached the tail within 10 s of the last", missing)
		case err := <-tailErr:
			return fmt.Errorf("the tail failed: %w", err)
		}
	}
	cancel()
	if err := <-tailErr; err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("the tail failed: %w", err)
	}
	var s samples
	for seq := warm + 1; seq <= total+warm; seq++ {
		if sent[seq] != 0 && recv[seq] != 0 {
			s.add(time.Duration(recv[seq] - sent[seq]))
		}
	}
	r.figure("latency_entries", float64(s.len()), "entries")
	r.figure("rate_achieved", float64(total+warm)/max(sendElapsed.Seconds(), 1e-9), "entries/s")
	r.figure("xadd_to_output_p50", ms(s.percentile(50)), "ms")
	r.figure("xadd_to_output_p90", ms(s.percentile(90)), "ms")
	r.goal("xadd_to_output_p99", ms(s.percentile(99)), "ms", "<=", GoalRedisTailP99Ms)
	r.figure("xadd_to_output_max", ms(s.max()), "ms")
	return nil
}
