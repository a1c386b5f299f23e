package redisstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/tidwall/gjson"

	"github.com/evtctl/evtctl/internal/redistest"
	"github.com/evtctl/evtctl/pkg/client"
)

// stream is a real server's stream for a test, with a plain go-redis client beside evtctl's.
type stream struct {
	t   *testing.T
	srv *redistest.Server
	key string
	rdb *redis.Client
}

func newStream(t *testing.T) *stream {
	t.Helper()
	srv := redistest.Start(t, redistest.Config{})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, DisableIdentity: true})
	t.Cleanup(func() { rdb.Close() })
	return &stream{t: t, srv: srv, key: "orders", rdb: rdb}
}

// add adds n entries as the Open edX event bus writes them, event_data Avro-like bytes,
// and returns their ids.
func (s *stream) add(n int) []string {
	s.t.Helper()
	ctx := context.Background()
	var ids []string
	for start := 0; start < n; start += 500 {
		p := s.rdb.Pipeline()
		var cmds []*redis.StringCmd
		for i := start; i < min(n, start+500); i++ {
			cmds = append(cmds, p.XAdd(ctx, &redis.XAddArgs{Stream: s.key, Values: []any{
				"type", "org.openedx.learning.course.enrollment.created.v1", "id", fmt.Sprintf("ev-%d-%d", time.Now().UnixNano(), i),
				"source", "openedx/lms/web", "time", "2026-11-22T10:00:00.123456+00:00", "minorversion", "0",
				"sourcehost", "lms-1", "sourcelib", "9.5.1", "event_data", []byte{0, 2, byte(i), 0xff}}}))
		}
		if _, err := p.Exec(ctx); err != nil {
			s.t.Fatal(err)
		}
		for _, c := range cmds {
			ids = append(ids, c.Val())
		}
	}
	return ids
}

func (s *stream) client(opts ...func(*client.Options)) *client.Client {
	s.t.Helper()
	o := client.Options{Node: s.srv.URL(s.key)}
	for _, f := range opts {
		f(&o)
	}
	c, err := client.New(o)
	if err != nil {
		s.t.Fatal(err)
	}
	return c
}

func (s *stream) do(args ...any) {
	s.t.Helper()
	if err := s.rdb.Do(context.Background(), args...).Err(); err != nil {
		s.t.Fatal(err)
	}
}

// checkOnce checks that got are want's ids, each once, in order.
func checkOnce(t *testing.T, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d entries, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("entry %d is %s, want %s", i, got[i], want[i])
		}
	}
}

func TestReplayEveryEntryOnce(t *testing.T) {
	t.Parallel()
	s := newStream(t)
	ids := s.add(2500)
	// Entries of one millisecond numbered past 9 order by number, not as text.
	base := time.Now().Add(time.Hour).UnixMilli()
	for i := 0; i < 12; i++ {
		id := fmt.Sprintf("%d-%d", base, i)
		s.do("XADD", s.key, id, "n", i)
		ids = append(ids, id)
	}
	c := s.client()
	for _, pageSize := range []int{1, 7, 100, 5000} {
		var got []string
		err := c.Range(context.Background(), client.RangeOptions{PageSize: pageSize, ReuseMemory: true}, func(items []client.Item) error {
			for _, it := range items {
				got = append(got, strings.Clone(it.Cursor))
				if !json.Valid(it.Data) || gjson.GetBytes(it.Data, "specversion").String() != "1.0" {
					return fmt.Errorf("item %s: %s", it.Cursor, it.Data)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		checkOnce(t, got, ids)
	}
	var back []string
	err := c.Range(context.Background(), client.RangeOptions{PageSize: 300, Reverse: true}, func(items []client.Item) error {
		for _, it := range items {
			back = append(back, it.Cursor)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, j := 0, len(back)-1; i < j; i, j = i+1, j-1 {
		back[i], back[j] = back[j], back[i]
	}
	checkOnce(t, back, ids)
}

func TestTailWhileAdding(t *testing.T) {
	t.Parallel()
	s := newStream(t)
	before := s.add(100)
	c := s.client()
	var mu sync.Mutex
	var want []string
	want = append(want, before...)
	const more = 1500
	go func() {
		for i := 0; i < more; i += 100 {
			ids := s.add(100)
			mu.Lock()
			want = append(want, ids...)
			mu.Unlock()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var got []string
	err := c.Stream(ctx, client.StreamOptions{FromStart: true, PageSize: 37, Wait: 5 * time.Second, ReuseMemory: true}, func(b client.Batch) error {
		if b.Gap != nil {
			return fmt.Errorf("gap: %s", b.Gap)
		}
		for _, it := range b.Items {
			got = append(got, strings.Clone(it.Cursor))
		}
		if len(got) >= 100+more {
			return errDone
		}
		return nil
	})
	if !errors.Is(err, errDone) {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	checkOnce(t, got, want)
}

var errDone = errors.New("done")

// read follows the stream from after until caught up, and returns the items' cursors and
// the gaps told.
func read(t *testing.T, c *client.Client, after string) ([]string, []client.Gap, string) {
	t.Helper()
	var got []string
	var gaps []client.Gap
	last := after
	err := c.Stream(context.Background(), client.StreamOptions{After: after, FromStart: after == "", PageSize: 50, Wait: time.Millisecond}, func(b client.Batch) error {
		if b.Gap != nil {
			gaps = append(gaps, *b.Gap)
		}
		for _, it := range b.Items {
			got = append(got, it.Cursor)
		}
		last = b.Cursor
		if b.CaughtUp {
			return errDone
		}
		return nil
	})
	if !errors.Is(err, errDone) {
		t.Fatal(err)
	}
	return got, gaps, last
}

// TestTrimWhileStopped: a consumer that kept its position with its count (a checkpoint)
// is told exactly how many entries were trimmed after it while it was stopped.
func TestTrimWhileStopped(t *testing.T) {
	t.Parallel()
	s := newStream(t)
	s.add(100)
	c := s.client()
	_, _, pos := read(t, c, "")
	saved, err := c.Identity(context.Background(), pos)
	if err != nil || gjson.GetBytes(saved, "added").Int() != 100 || gjson.GetBytes(saved, "at").String() != pos {
		t.Fatalf("identity at %s: %s %v", pos, saved, err)
	}

	ids := s.add(50)
	s.do("XTRIM", s.key, "MAXLEN", 10)

	// A new process resumes from the checkpoint.
	c2 := s.client()
	if err := c2.CheckIdentity(context.Background(), saved); err != nil {
		t.Fatal(err)
	}
	got, gaps, _ := read(t, c2, pos)
	checkOnce(t, got, ids[40:])
	if len(gaps) != 1 || gaps[0].Kind != client.GapLost || gaps[0].Lost != 40 || gaps[0].After != pos || gaps[0].Oldest != ids[40] {
		t.Fatalf("gaps %+v", gaps)
	}
	if !strings.Contains(gaps[0].String(), "(40 events lost)") || !strings.Contains(gaps[0].String(), "the stream now starts at "+ids[40]) {
		t.Fatalf("said %q", gaps[0].String())
	}

	// Without the count, the reader is told it cannot know.
	got, gaps, _ = read(t, s.client(), pos)
	checkOnce(t, got, ids[40:])
	if len(gaps) != 1 || gaps[0].Lost != 0 || !strings.Contains(gaps[0].Detail, "evtctl cannot tell") {
		t.Fatalf("gaps %+v", gaps)
	}
}

// TestDeleteInTheMiddle: entries deleted with XDEL after the reader's position are
// reported as deleted entries, with the newest of them and its neighbours, once.
func TestDeleteInTheMiddle(t *testing.T) {
	t.Parallel()
	s := newStream(t)
	s.add(30)
	c := s.client()
	_, _, pos := read(t, c, "")
	saved, err := c.Identity(context.Background(), pos)
	if err != nil {
		t.Fatal(err)
	}
	ids := s.add(20)
	s.do("XDEL", s.key, ids[5], ids[11])
	want := append(append(append([]string(nil), ids[:5]...), ids[6:11]...), ids[12:]...)

	c2 := s.client()
	if err := c2.CheckIdentity(context.Background(), saved); err != nil {
		t.Fatal(err)
	}
	got, gaps, _ := read(t, c2, pos)
	checkOnce(t, got, want)
	if len(gaps) != 1 || gaps[0].Lost != 2 || gaps[0].Oldest != ids[12] {
		t.Fatalf("gaps %+v", gaps)
	}
	wantText := fmt.Sprintf("entries were deleted (XDEL) after the cursor, the newest of them %s, which lay between %s and %s", ids[11], ids[10], ids[12])
	if !strings.Contains(gaps[0].Detail, wantText) || strings.Contains(gaps[0].Detail, "trimmed") {
		t.Fatalf("said %q", gaps[0].Detail)
	}

	// Read in small pages without the count: told once, on the first page.
	var told []client.Gap
	var seen []string
	err = s.client().Stream(context.Background(), client.StreamOptions{After: pos, PageSize: 3, Wait: time.Millisecond}, func(b client.Batch) error {
		if b.Gap != nil {
			told = append(told, *b.Gap)
		}
		for _, it := range b.Items {
			seen = append(seen, it.Cursor)
		}
		if b.CaughtUp {
			return errDone
		}
		return nil
	})
	if !errors.Is(err, errDone) {
		t.Fatal(err)
	}
	checkOnce(t, seen, want)
	if len(told) != 1 || told[0].Lost != 0 || !strings.Contains(told[0].Detail, ids[11]) {
		t.Fatalf("told %+v", told)
	}

	// From before the deletions by time, or from the start: the hole is still told.
	_, gaps, _ = read(t, s.client(), "")
	if len(gaps) != 1 || !strings.Contains(gaps[0].Detail, wantText) {
		t.Fatalf("from the start: %+v", gaps)
	}
	// From after them: nothing.
	_, gaps, _ = read(t, s.client(), ids[15])
	if len(gaps) != 0 {
		t.Fatalf("after the deletions: %+v", gaps)
	}
}

func TestFilteredPagesAreBounded(t *testing.T) {
	t.Parallel()
	s := newStream(t)
	ids := s.add(25_000)
	s.do("XADD", s.key, "*", "type", "rare", "id", "1", "source", "/s")
	c := s.client()
	var pages, matched int
	after := ""
	for {
		p, err := c.Page(context.Background(), client.PageRequest{Query: "type = 'rare'", After: after, Max: 10})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		matched += len(p.Items)
		if !p.More {
			break
		}
		if c.Compare(p.Next, after) <= 0 {
			t.Fatalf("page %d did not move on from %s", pages, after)
		}
		after = p.Next
		if pages == 1 && (len(p.Items) != 0 || p.Next != ids[maxExamined-1]) {
			t.Fatalf("first page: %d items, next %s", len(p.Items), p.Next)
		}
	}
	if pages != 3 || matched != 1 {
		t.Fatalf("%d pages, %d matched", pages, matched)
	}
}

// TestLongPoll: a page open at the head waits for the next entry, and ends with its ctx.
func TestLongPoll(t *testing.T) {
	t.Parallel()
	s := newStream(t)
	ids := s.add(3)
	c := s.client()
	done := make(chan *client.Page, 1)
	go func() {
		p, err := c.Page(context.Background(), client.PageRequest{After: ids[2], Max: 10, Wait: time.Minute})
		if err != nil {
			t.Error(err)
		}
		done <- p
	}()
	waitFor(t, func() bool {
		out, _ := s.rdb.ClientList(context.Background()).Result()
		return strings.Contains(out, "cmd=xread")
	})
	late := s.add(1)
	p := <-done
	if p == nil || len(p.Items) != 1 || p.Items[0].Cursor != late[0] || p.More {
		t.Fatalf("page %+v", p)
	}

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := c.Page(ctx, client.PageRequest{After: late[0], Max: 10, Wait: time.Hour})
		errc <- err
	}()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("ended with %v", err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSince: a time start takes the entries whose ids' time is at or after it.
func TestSince(t *testing.T) {
	t.Parallel()
	s := newStream(t)
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	ms := t0.UnixMilli()
	for _, id := range []string{fmt.Sprint(ms-1, "-5"), fmt.Sprint(ms, "-0"), fmt.Sprint(ms, "-1"), fmt.Sprint(ms+1, "-0")} {
		s.do("XADD", s.key, id, "n", id)
	}
	c := s.client()
	for _, tc := range []struct {
		from, to time.Time
		want     []string
	}{
		{t0, time.Time{}, []string{fmt.Sprint(ms, "-0"), fmt.Sprint(ms, "-1"), fmt.Sprint(ms+1, "-0")}},
		{t0.Add(time.Microsecond), time.Time{}, []string{fmt.Sprint(ms+1, "-0")}},
		{time.Time{}, t0, []string{fmt.Sprint(ms-1, "-5"), fmt.Sprint(ms, "-0"), fmt.Sprint(ms, "-1")}},
	} {
		var got []string
		err := c.Range(context.Background(), client.RangeOptions{From: client.Position{Time: tc.from}, To: client.Position{Time: tc.to}}, func(items []client.Item) error {
			for _, it := range items {
				got = append(got, it.Cursor)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		checkOnce(t, got, tc.want)
	}
}

func TestFailures(t *testing.T) {
	t.Parallel()
	s := newStream(t)
	s.do("SET", "plain", "x")
	ctx := context.Background()

	c, err := client.New(client.Options{Node: "redis://" + s.srv.Addr + "/0/plain"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Page(ctx, client.PageRequest{Max: 1})
	if err == nil || client.Retryable(err) || !strings.Contains(err.Error(), `key "plain" is not a stream`) {
		t.Fatalf("WRONGTYPE: %v", err)
	}

	gone := redistest.Start(t, redistest.Config{})
	url := gone.URL("s")
	gone.Stop()
	c, _ = client.New(client.Options{Node: url})
	_, _, err = c.Bounds(ctx)
	if err == nil || client.Retryable(err) || !strings.Contains(err.Error(), "no Redis server answers at "+url) {
		t.Fatalf("nothing listening: %v", err)
	}

	locked := redistest.Start(t, redistest.Config{Password: "hunter2"})
	for _, node := range []string{"redis://:wrong-pw@" + locked.Addr + "/0/s", "redis://" + locked.Addr + "/0/s"} {
		c, _ = client.New(client.Options{Node: node})
		_, err = c.Page(ctx, client.PageRequest{Max: 1})
		if err == nil || client.Retryable(err) || strings.Contains(err.Error(), "wrong-pw") || !strings.Contains(err.Error(), "refused") {
			t.Fatalf("%s: %v", node, err)
		}
		if strings.Contains(c.Node(), "wrong-pw") {
			t.Fatalf("node %s", c.Node())
		}
	}
	for _, o := range []client.Options{{Node: "redis://:hunter2@" + locked.Addr + "/0/s"}, {Node: "redis://" + locked.Addr + "/0/s", Token: "hunter2"}} {
		c, _ = client.New(o)
		if _, err := c.Page(ctx, client.PageRequest{Max: 1}); err != nil {
			t.Fatalf("%s: %v", o.Node, err)
		}
		if strings.Contains(c.Node(), "hunter2") {
			t.Fatalf("node %s", c.Node())
		}
	}

	// A server that answered once and then went away is waited for: a restart.
	c = s.client()
	if _, _, err := c.Bounds(ctx); err != nil {
		t.Fatal(err)
	}
	s.srv.Stop()
	if _, _, err := c.Bounds(ctx); err == nil || !client.Retryable(err) {
		t.Fatalf("after a stop: %v", err)
	}
}

func TestTLS(t *testing.T) {
	t.Parallel()
	files, err := redistest.WriteTLSFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srv := redistest.Start(t, redistest.Config{TLS: &files})
	ctx := context.Background()
	node := srv.URL("s") // rediss://
	c, _ := client.New(client.Options{Node: node, CAFile: files.CA})
	if _, _, err := c.Bounds(ctx); err != nil {
		t.Fatalf("with the CA file: %v", err)
	}
	c, _ = client.New(client.Options{Node: node, Insecure: true})
	if _, _, err := c.Bounds(ctx); err != nil {
		t.Fatalf("with --insecure: %v", err)
	}
	c, _ = client.New(client.Options{Node: node})
	if _, _, err := c.Bounds(ctx); err == nil || client.Retryable(err) || !strings.Contains(err.Error(), "TLS with "+node+" failed") {
		t.Fatalf("an authority not trusted: %v", err)
	}
	plain := "redis://" + srv.Addr + "/0/s"
	c, _ = client.New(client.Options{Node: plain})
	if _, _, err := c.Bounds(ctx); err == nil || client.Retryable(err) || !strings.Contains(err.Error(), "TLS port (rediss://)") {
		t.Fatalf("redis:// to a TLS port: %v", err)
	}
}
