package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/evtctl/evtctl/internal/redistest"
	"github.com/evtctl/evtctl/pkg/client"
	"github.com/evtctl/evtctl/pkg/client/redisstream"
)

func init() { scriptCmds["redis"] = cmdRedis }

// cmdRedis drives a real redis-server for a script (scripts that use it begin with
// [!exec:redis-server] skip):
//
//	redis start [-tls] [-password P]   start one; REDIS is redis://127.0.0.1:PORT/0 (rediss://
//	                                   with -tls, whose authority is in $WORK/tls/ca.pem), REDIS_PORT its port
//	redis do ARGS...                   run a command; its reply goes to stdout
//	redis id NAME STREAM I             set NAME to the id of entry I of STREAM (from 0; -1 the newest)
func cmdRedis(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) == 0 {
		ts.Fatalf("usage: redis start|do|id ...")
	}
	switch args[0] {
	case "start":
		if neg {
			ts.Fatalf("unsupported: ! redis start")
		}
		cfg := redistest.Config{Dir: ts.MkAbs("redis-data")}
		for i := 1; i < len(args); i++ {
			switch args[i] {
			case "-tls":
				dir := ts.MkAbs("tls")
				ts.Check(os.MkdirAll(dir, 0o755))
				files, err := redistest.WriteTLSFiles(dir)
				ts.Check(err)
				cfg.TLS = &files
			case "-password":
				i++
				cfg.Password = args[i]
			default:
				ts.Fatalf("redis start: unknown flag %s", args[i])
			}
		}
		ts.Check(os.MkdirAll(cfg.Dir, 0o755))
		srv, err := redistest.StartServer(cfg)
		ts.Check(err)
		ts.Defer(srv.Stop)
		ts.Setenv("REDIS", strings.TrimSuffix(srv.URL(""), "/"))
		ts.Setenv("REDIS_PORT", strconv.Itoa(srv.Port))
	case "do", "id":
		rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + ts.Getenv("REDIS_PORT"), DisableIdentity: true})
		defer rdb.Close()
		ctx := context.Background()
		if args[0] == "do" {
			var cmd []any
			for _, a := range args[1:] {
				cmd = append(cmd, a)
			}
			v, err := rdb.Do(ctx, cmd...).Result()
			if (err != nil) != neg {
				ts.Fatalf("redis %s: %v", strings.Join(args[1:], " "), err)
			}
			fmt.Fprintln(ts.Stdout(), v)
			return
		}
		if len(args) != 4 {
			ts.Fatalf("usage: redis id NAME STREAM I")
		}
		i, err := strconv.Atoi(args[3])
		ts.Check(err)
		var msgs []redis.XMessage
		if i >= 0 {
			msgs, err = rdb.XRangeN(ctx, args[2], "-", "+", int64(i+1)).Result()
		} else {
			msgs, err = rdb.XRevRangeN(ctx, args[2], "+", "-", int64(-i)).Result()
		}
		ts.Check(err)
		if n := max(i+1, -i); len(msgs) < n {
			ts.Fatalf("redis id: stream %s has %d entries", args[2], len(msgs))
		}
		ts.Setenv(args[1], msgs[len(msgs)-1].ID)
	default:
		ts.Fatalf("redis: unknown subcommand %s", args[0])
	}
}

// compareCursors orders two cursors a script's output holds: as Redis entry ids when both
// are, else as text (the events method's cursors, which text order orders).
func compareCursors(a, b string) int {
	ia, err1 := redisstream.ParseID(a)
	ib, err2 := redisstream.ParseID(b)
	if err1 == nil && err2 == nil {
		return ia.Compare(ib)
	}
	return strings.Compare(a, b)
}

// TestInteractiveRedisTmux runs evtctl tail -i on a Redis stream in a tmux session and
// checks the screen: testdata/tmux/tail_redis.sh says what.
func TestInteractiveRedisTmux(t *testing.T) {
	t.Parallel()
	needTmux(t)
	srv := redistest.Start(t, redistest.Config{})
	p, err := redisstream.NewProducer(srv.URL("orders"), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var events [][]byte
	for i := 1; i <= 250; i++ {
		events = append(events, fmt.Appendf(nil, `{"specversion":"1.0","id":"seed-%d","source":"openedx/lms/web","type":"org.openedx.learning.course.enrollment.created.v1","time":"2026-11-22T10:00:00Z","minorversion":0,"data_base64":"AAI="}`, i))
	}
	if _, err := p.Send(context.Background(), events); err != nil {
		t.Fatal(err)
	}
	runTmuxScript(t, "tail_redis.sh", "STREAM="+srv.URL("orders"))
}
