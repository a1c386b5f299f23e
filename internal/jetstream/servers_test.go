package jetstream_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/evtctl/evtctl/internal/jetstream/natstest"
)

// startServer runs an in-process NATS server with JetStream on a loopback port; port 0
// picks a free one. Its storage is dir (a new temporary directory when "").
func startServer(t testing.TB, port int, dir string) *server.Server {
	t.Helper()
	if port == 0 {
		port = -1
	}
	if dir == "" {
		dir = t.TempDir()
	}
	s, err := server.NewServer(&server.Options{
		ServerName: "solo", Host: "127.0.0.1", Port: port,
		JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("NATS server did not start")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s
}

// freePorts finds n free loopback ports (for cluster routes, which must be known before
// the servers start).
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ls []net.Listener
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

// startCluster runs three in-process NATS servers as one JetStream cluster and waits until
// it can create streams.
func startCluster(t testing.TB) []*server.Server {
	t.Helper()
	var srvs []*server.Server
	for attempt := 1; ; attempt++ {
		var err error
		if srvs, err = tryCluster(t); err == nil {
			break
		}
		// The route ports were free when chosen, but another process may have taken one
		// since (tests run side by side): choose again.
		if attempt == 3 {
			t.Fatal(err)
		}
		t.Logf("%v; starting the cluster again on other ports", err)
	}
	nc, err := nats.Connect(clusterURL(srvs))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := js.AccountInfo(ctx)
		cancel()
		if err == nil {
			return srvs
		}
		if time.Now().After(deadline) {
			t.Fatalf("the JetStream cluster did not form: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// tryCluster starts the three servers of a cluster on route ports free a moment ago;
// when one does not start, it stops the others and says so.
func tryCluster(t testing.TB) ([]*server.Server, error) {
	ports := freePorts(t, 3)
	var routes []string
	for _, p := range ports {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	var srvs []*server.Server
	stop := func() {
		for _, s := range srvs {
			s.Shutdown()
			s.WaitForShutdown()
		}
	}
	for i, p := range ports {
		s, err := server.NewServer(&server.Options{
			ServerName: fmt.Sprintf("n%d", i+1), Host: "127.0.0.1", Port: -1,
			JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true,
			Cluster: server.ClusterOpts{Name: "evtctl-test", Host: "127.0.0.1", Port: p},
			Routes:  server.RoutesFromStr(strings.Join(routes, ",")),
		})
		if err != nil {
			stop()
			return nil, err
		}
		go s.Start()
		srvs = append(srvs, s)
	}
	for i, s := range srvs {
		if !s.ReadyForConnections(20 * time.Second) {
			stop()
			return nil, fmt.Errorf("NATS server n%d (route port %d) did not start", i+1, ports[i])
		}
	}
	t.Cleanup(stop)
	return srvs, nil
}

func clusterURL(srvs []*server.Server) string {
	var urls []string
	for _, s := range srvs {
		if s.Running() {
			urls = append(urls, s.ClientURL())
		}
	}
	return strings.Join(urls, ",")
}

// streamLeader returns the server leading the stream, waiting for one to be elected.
func streamLeader(t testing.TB, srvs []*server.Server, stream string) *server.Server {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for _, s := range srvs {
			if s.Running() && s.JetStreamIsStreamLeader("$G", stream) {
				return s
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("stream %s has no leader", stream)
	return nil
}

func init() { natstest.ServeIfAsked() } // a test binary started as nats-server serves and exits
