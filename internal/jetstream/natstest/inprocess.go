package natstest

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
)

// InProcess is NATS servers with JetStream run in this process on loopback ports: one
// alone, or a JetStream cluster. A server stopped and started again keeps its ports and its
// storage.
type InProcess struct {
	base    []*server.Options // what each server starts with; Port is its bound port once known
	running []*server.Options // the options of each running server (the server writes to them)
	srvs    []*server.Server  // nil while stopped
}

// InProcessConfig describes in-process servers to start.
type InProcessConfig struct {
	// Servers is how many: 0 or 1 runs one alone, more run a JetStream cluster of them
	// (names n1, n2, ...).
	Servers int
	// Dir is the storage of server i (from 0). StartInProcess needs it; NewInProcess
	// defaults to new temporary directories.
	Dir func(i int) string
	// Configure, when set, changes the options of server i before it first starts (users,
	// for instance).
	Configure func(i int, o *server.Options)
}

// Solo starts one NATS server with JetStream in this process for t, stopped when t ends.
func Solo(t testing.TB) *server.Server {
	t.Helper()
	return NewInProcess(t, InProcessConfig{}).Server(0)
}

// NewInProcess is StartInProcess for t: storage in t's temporary directories unless
// cfg.Dir says otherwise, the servers stopped when t ends, and t failed when they do not
// start.
func NewInProcess(t testing.TB, cfg InProcessConfig) *InProcess {
	t.Helper()
	if cfg.Dir == nil {
		dirs := make([]string, max(cfg.Servers, 1))
		for i := range dirs {
			dirs[i] = t.TempDir()
		}
		cfg.Dir = func(i int) string { return dirs[i] }
	}
	g, err := StartInProcess(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.StopAll)
	return g
}

// StartInProcess starts the servers of cfg and, for a cluster, waits until JetStream
// answers (the cluster has elected its meta leader). The caller stops them with StopAll.
func StartInProcess(cfg InProcessConfig) (*InProcess, error) {
	if cfg.Dir == nil {
		return nil, fmt.Errorf("natstest: InProcessConfig.Dir is required")
	}
	n := max(cfg.Servers, 1)
	for attempt := 1; ; attempt++ {
		g, err := tryInProcess(cfg, n)
		if err == nil || n == 1 || attempt == 3 {
			return g, err
		}
		// The route ports were free when chosen, but another process may have taken one
		// since (tests run side by side): choose again.
	}
}

func tryInProcess(cfg InProcessConfig, n int) (*InProcess, error) {
	g := &InProcess{running: make([]*server.Options, n), srvs: make([]*server.Server, n)}
	var routePorts []int
	var routes []string
	if n > 1 {
		// Route ports must be known before the servers start, for each to name the others.
		var err error
		if routePorts, err = freePorts(n); err != nil {
			return nil, err
		}
		for _, p := range routePorts {
			routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
		}
	}
	for i := range n {
		o := &server.Options{
			ServerName: fmt.Sprintf("n%d", i+1), Host: "127.0.0.1", Port: server.RANDOM_PORT,
			JetStream: true, StoreDir: cfg.Dir(i), NoLog: true, NoSigs: true,
		}
		if n > 1 {
			o.Cluster = server.ClusterOpts{Name: "evtctl-test", Host: "127.0.0.1", Port: routePorts[i]}
			o.Routes = server.RoutesFromStr(strings.Join(routes, ","))
		}
		if cfg.Configure != nil {
			cfg.Configure(i, o)
		}
		g.base = append(g.base, o)
	}
	if err := g.Restart(); err != nil {
		g.StopAll()
		return nil, err
	}
	return g, nil
}

// Restart starts every stopped server again, on its ports and storage, and for a cluster
// waits until JetStream answers.
func (g *InProcess) Restart() error {
	for i, s := range g.srvs {
		if s == nil {
			if err := g.start(i); err != nil {
				return err
			}
		}
	}
	if len(g.srvs) > 1 {
		return WaitJetStream(g.URL(), 30*time.Second)
	}
	return nil
}

func (g *InProcess) start(i int) error {
	o := *g.base[i]
	s, err := server.NewServer(&o)
	if err != nil {
		return err
	}
	go s.Start()
	if !s.ReadyForConnections(20 * time.Second) {
		s.Shutdown()
		s.WaitForShutdown()
		what := ""
		if o.Cluster.Port != 0 {
			what = fmt.Sprintf(" (route port %d)", o.Cluster.Port)
		}
		return fmt.Errorf("NATS server %s%s did not start", o.ServerName, what)
	}
	g.base[i].Port = s.Addr().(*net.TCPAddr).Port // the same port when started again
	g.srvs[i], g.running[i] = s, &o
	return nil
}

// Stop stops server i (from 0); Restart starts it again.
func (g *InProcess) Stop(i int) {
	if s := g.srvs[i]; s != nil {
		s.Shutdown()
		s.WaitForShutdown()
		g.srvs[i], g.running[i] = nil, nil
	}
}

// StopAll stops every server.
func (g *InProcess) StopAll() {
	for i := range g.srvs {
		g.Stop(i)
	}
}

// Server is server i, or nil while it is stopped.
func (g *InProcess) Server(i int) *server.Server { return g.srvs[i] }

// Options are the options running server i was started with (a copy of them is what
// Server.ReloadOptions takes), or nil while it is stopped.
func (g *InProcess) Options(i int) *server.Options { return g.running[i] }

// Name is the server name of server i.
func (g *InProcess) Name(i int) string { return g.base[i].ServerName }

// URL is the client URL of every server, stopped ones included, comma separated.
func (g *InProcess) URL() string {
	var urls []string
	for _, o := range g.base {
		urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", o.Port))
	}
	return strings.Join(urls, ",")
}

// WaitJetStream waits up to within until the JetStream API answers at url (servers
// comma separated): a cluster has elected its meta leader.
func WaitJetStream(url string, within time.Duration) error {
	nc, err := nats.Connect(url)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := natsjs.New(nc)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := js.AccountInfo(ctx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("JetStream at %s did not answer within %v: %w", url, within, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// freePorts returns n loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// WaitUntil polls cond until it holds, failing the test after within: for what a cluster
// does in its own time (a leader elected, a message replicated).
func WaitUntil(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting until %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
