// Package natstest starts NATS servers for tests: in this process (InProcess, Solo), the
// quickest, with the server module the project builds with; and as child processes (Start,
// StartCluster), so that the JetStream store is tested against the server lines people run,
// and against a server killed with SIGKILL.
//
// Released lines (Releases) are built when first needed, with `go install
// github.com/nats-io/nats-server/v2@vX.Y.Z` through the Go module proxy, into a directory
// kept between runs: $EVTCTL_NATS_SERVERS/<line>/nats-server (default
// <user cache dir>/evtctl/nats-servers). A file lock makes the test processes of one `go
// test ./...` build each line once. A line that cannot be built skips its tests, saying
// why. Line "2.9" is Debian's package, looked for as the nats-server on PATH (or in
// /usr/sbin), when it reports a 2.9 version; it is never built.
//
// The server module the project builds with runs as a child process too, with nothing to
// build: Self is the test binary itself, which serves as nats-server when a test package
// calls ServeIfAsked from an init function.
package natstest

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/evtctl/evtctl/internal/buildtest"
)

// EnvDir names the environment variable that holds the directory of server binaries.
const EnvDir = "EVTCTL_NATS_SERVERS"

// Releases are the released lines the store is tested against as child processes, each
// with the release built for it: the newest patch of the line when it was last chosen.
var Releases = map[string]string{
	"2.10": "2.10.29",
	"2.11": "2.11.17",
}

// envSelf marks a test binary started to serve as nats-server.
const envSelf = "EVTCTL_TEST_AS_NATS_SERVER"

// Dir is where the release lines are kept.
func Dir() string { return buildtest.Dir(EnvDir, "nats-servers") }

// Binary is a nats-server program: a path, and the environment it needs beside this
// process's.
type Binary struct {
	Path    string
	Env     []string
	Version string
}

// Self is the test binary serving as nats-server, with the server module the project
// builds with (the newest line it supports). The test package must call ServeIfAsked from
// an init function.
func Self() Binary {
	return Binary{Path: os.Args[0], Env: []string{envSelf + "=1"}, Version: server.VERSION}
}

// ServeIfAsked runs nats-server and exits when this process was started by Self; it
// returns at once otherwise.
func ServeIfAsked() {
	if os.Getenv(envSelf) != "1" {
		return
	}
	fs := flag.NewFlagSet("nats-server", flag.ExitOnError)
	opts, err := server.ConfigureOptions(fs, os.Args[1:], server.PrintServerAndExit, fs.Usage, server.PrintTLSHelpAndDie)
	if err != nil {
		server.PrintAndDie("nats-server: " + err.Error())
	}
	s, err := server.NewServer(opts)
	if err != nil {
		server.PrintAndDie("nats-server: " + err.Error())
	}
	s.ConfigureLogger()
	if err := server.Run(s); err != nil {
		server.PrintAndDie(err.Error())
	}
	s.WaitForShutdown()
	os.Exit(0)
}

// Line returns the nats-server of a release line ("2.10"), building it when it is one of
// Releases and missing, or an error saying what is missing.
func Line(line string) (Binary, error) {
	if line == "2.9" {
		return system(line)
	}
	release, ok := Releases[line]
	if !ok {
		return Binary{}, fmt.Errorf("nats-server %s is not a line these tests build (%v)", line, slices.Sorted(maps.Keys(Releases)))
	}
	built.mu.Lock()
	defer built.mu.Unlock()
	if b, ok := built.lines[line]; ok {
		return b.bin, b.err
	}
	bin, err := build(line, release)
	if built.lines == nil {
		built.lines = map[string]buildResult{}
	}
	built.lines[line] = buildResult{bin, err}
	return bin, err
}

type buildResult struct {
	bin Binary
	err error
}

// built holds what this process found or built, line by line.
var built struct {
	mu    sync.Mutex
	lines map[string]buildResult
}

// build returns the nats-server of release in Dir()/line, building it there first when it
// is missing or of another version. Test processes that run at once build it once: the
// others wait on a file lock and find it built.
func build(line, release string) (Binary, error) {
	dir := filepath.Join(Dir(), line)
	bin := filepath.Join(dir, "nats-server")
	if v, err := Version(bin); err == nil && v == release {
		return Binary{Path: bin, Version: v}, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Binary{}, err
	}
	// Another test process may be building it: wait for that build (a few minutes at most)
	// rather than build it too.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	lock, err := buildtest.WaitLock(ctx, filepath.Join(Dir(), line+".lock"))
	if err != nil {
		return Binary{}, fmt.Errorf("no nats-server %s: %w", line, err)
	}
	defer lock.Unlock()
	if v, err := Version(bin); err == nil && v == release {
		return Binary{Path: bin, Version: v}, nil // another process built it meanwhile
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return Binary{}, fmt.Errorf("building nats-server %s needs the go command on PATH: %w", release, err)
	}
	pkg := "github.com/nats-io/nats-server/v2@v" + release
	cmd := exec.CommandContext(ctx, goCmd, "install", pkg)
	cmd.Dir = dir // outside any module: the release builds with its own go.mod
	// GOFLAGS of the test run (-race, -mod) are not for the server's build.
	cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOFLAGS=", "CGO_ENABLED=0")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return Binary{}, fmt.Errorf("no nats-server %s: building it with `GOBIN=%s go install %s` failed: %v\n%s", line, dir, pkg, err, buildtest.LastLines(out, 10))
	}
	v, err := Version(bin)
	if err != nil {
		return Binary{}, err
	}
	if v != release {
		return Binary{}, fmt.Errorf("built nats-server %s, but it reports version %s", release, v)
	}
	fmt.Fprintf(os.Stderr, "natstest: built nats-server %s into %s in %v\n", release, dir, time.Since(start).Round(time.Second))
	return Binary{Path: bin, Version: v}, nil
}

// system returns the nats-server installed on the system (PATH, /usr/sbin, /usr/bin) when
// it is of the line.
func system(line string) (Binary, error) {
	var tried []string
	var cands []string
	if p, err := exec.LookPath("nats-server"); err == nil {
		cands = append(cands, p)
	}
	cands = append(cands, "/usr/sbin/nats-server", "/usr/bin/nats-server")
	for _, c := range cands {
		if _, err := os.Stat(c); err != nil {
			tried = append(tried, c)
			continue
		}
		v, err := Version(c)
		if err != nil {
			return Binary{}, err
		}
		if strings.HasPrefix(v, line+".") {
			return Binary{Path: c, Version: v}, nil
		}
		tried = append(tried, fmt.Sprintf("%s (%s)", c, v))
	}
	return Binary{}, fmt.Errorf("no nats-server %s: looked at %s; install one with: apt-get install nats-server (Debian 12 ships 2.9.10)", line, strings.Join(tried, ", "))
}

// NeedLine is Line for a test: it skips t when the line is missing.
func NeedLine(t testing.TB, line string) Binary {
	t.Helper()
	b, err := Line(line)
	if err != nil {
		t.Skip(err)
	}
	return b
}

var versionRE = regexp.MustCompile(`v?(\d+\.\d+\.\d+\S*)`)

// Version runs bin --version and returns its version, without the "v".
func Version(bin string) (string, error) {
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s --version: %v: %s", bin, err, out)
	}
	m := versionRE.FindSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("%s --version: no version in %q", bin, out)
	}
	return string(m[1]), nil
}

// Config describes a server to start, with JetStream storage in a new temporary directory.
type Config struct {
	Name string // server_name; default "n1"
	Port int    // client port; 0 picks a free one
	// Cluster, when set, makes the server one of a JetStream cluster: its route port and
	// the route ports of every member (its own included).
	Cluster *Cluster
	// Extra is more configuration text, e.g. a tls block or accounts.
	Extra string
}

// Cluster is a server's place in a cluster (named evtctl-test).
type Cluster struct {
	Port   int
	Routes []int
}

// Server is a nats-server running as a child process.
type Server struct {
	Bin     Binary
	Config  Config
	Version string
	dir     string
	conf    string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{}
}

// Start runs bin with cfg and waits until it is ready for connections. The server is
// killed when the test ends. A client port Start chose itself, free when chosen, may have
// been taken since by another process (tests run side by side): it then chooses again.
func Start(t testing.TB, bin Binary, cfg Config) *Server {
	t.Helper()
	if cfg.Name == "" {
		cfg.Name = "n1"
	}
	s := &Server{Bin: bin, Config: cfg, dir: t.TempDir(), Version: bin.Version}
	s.conf = filepath.Join(s.dir, "nats.conf")
	s.logPath = filepath.Join(s.dir, "nats.log")
	t.Cleanup(func() {
		s.Kill()
		if t.Failed() {
			if b, err := os.ReadFile(s.logPath); err == nil {
				t.Logf("nats-server %s (%s) log, last lines:\n%s", cfg.Name, s.Version, buildtest.LastLines(b, 30))
			}
		}
	})
	for attempt := 1; ; attempt++ {
		if cfg.Port == 0 {
			port, err := pickPort()
			if err != nil {
				t.Fatal(err)
			}
			s.Config.Port = port
		}
		if err := os.WriteFile(s.conf, []byte(s.configText()), 0o600); err != nil {
			t.Fatal(err)
		}
		err := s.Restart()
		if err == nil {
			return s
		}
		if cfg.Port != 0 || attempt == 5 || !strings.Contains(err.Error(), "address already in use") {
			t.Fatal(err)
		}
	}
}

// pickPort chooses a client port for Start (a variable, for a test to choose one in use).
var pickPort = func() (int, error) {
	ports, err := freePorts(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

func (s *Server) configText() string {
	c := s.Config
	var b strings.Builder
	fmt.Fprintf(&b, "server_name: %q\nlisten: \"127.0.0.1:%d\"\n", c.Name, c.Port)
	fmt.Fprintf(&b, "jetstream {\n  store_dir: %q\n}\n", filepath.Join(s.dir, "jetstream"))
	if cl := c.Cluster; cl != nil {
		var routes []string
		for _, p := range cl.Routes {
			routes = append(routes, fmt.Sprintf("    \"nats://127.0.0.1:%d\"", p))
		}
		fmt.Fprintf(&b, "cluster {\n  name: \"evtctl-test\"\n  listen: \"127.0.0.1:%d\"\n  routes: [\n%s\n  ]\n}\n", cl.Port, strings.Join(routes, "\n"))
	}
	b.WriteString(c.Extra)
	b.WriteString("\n")
	return b.String()
}

// URL is the server's client URL.
func (s *Server) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", s.Config.Port) }

// Running reports whether the process is running.
func (s *Server) Running() bool {
	if s.cmd == nil {
		return false
	}
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// Restart starts the server again (or the first time), on the same port and storage, and
// waits until it is ready for connections.
func (s *Server) Restart() error {
	if s.Running() {
		return fmt.Errorf("nats-server %s is running", s.Config.Name)
	}
	before := s.readyLines()
	cmd := exec.Command(s.Bin.Path, "-c", s.conf, "-l", s.logPath)
	if len(s.Bin.Env) > 0 {
		cmd.Env = append(os.Environ(), s.Bin.Env...)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return err
	}
	s.cmd, s.done = cmd, make(chan struct{})
	done := s.done
	go func() { _ = cmd.Wait(); close(done) }()
	deadline := time.Now().Add(20 * time.Second)
	for s.readyLines() <= before {
		select {
		case <-done:
			b, _ := os.ReadFile(s.logPath)
			return fmt.Errorf("nats-server %s exited at start: %s%s", s.Config.Name, out.String(), buildtest.LastLines(b, 20))
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nats-server %s was not ready within 20s", s.Config.Name)
		}
	}
	return nil
}

func (s *Server) readyLines() int {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return 0
	}
	return bytes.Count(b, []byte("Server is ready"))
}

// Kill stops the server with SIGKILL, as a crash does, and waits for it to exit.
func (s *Server) Kill() { s.signal(syscall.SIGKILL) }

// Stop stops the server gracefully (SIGTERM) and waits for it to exit.
func (s *Server) Stop() { s.signal(syscall.SIGTERM) }

func (s *Server) signal(sig syscall.Signal) {
	if !s.Running() {
		return
	}
	_ = s.cmd.Process.Signal(sig)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// StartCluster starts n servers of bin as one JetStream cluster (names n1, n2, ...) and
// waits until JetStream answers (the cluster has elected its meta leader).
func StartCluster(t testing.TB, bin Binary, n int) []*Server {
	t.Helper()
	ports, err := freePorts(2 * n)
	if err != nil {
		t.Fatal(err)
	}
	routes := ports[n:]
	var srvs []*Server
	for i := range n {
		srvs = append(srvs, Start(t, bin, Config{
			Name: fmt.Sprintf("n%d", i+1), Port: ports[i],
			Cluster: &Cluster{Port: routes[i], Routes: routes},
		}))
	}
	if err := WaitJetStream(URLs(srvs), 30*time.Second); err != nil {
		t.Fatalf("the JetStream cluster did not form: %v", err)
	}
	return srvs
}

// URLs is the client URLs of the running servers, comma separated.
func URLs(srvs []*Server) string {
	var u []string
	for _, s := range srvs {
		if s.Running() {
			u = append(u, s.URL())
		}
	}
	return strings.Join(u, ",")
}
