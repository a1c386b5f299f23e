// Package redistest starts real Redis servers (redis-server, 7.0 or later) for tests: throw-away
// servers on free loopback ports, with nothing saved to disk, as child processes. A test
// whose machine has no redis-server skips, saying so.
package redistest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Server is a running redis-server.
type Server struct {
	Addr string // host:port on loopback
	Port int
	// TLS: the server takes TLS on Addr (see Config.TLS).
	TLS bool

	cmd  *exec.Cmd
	done chan struct{}
	once sync.Once
}

// Config says how to start a server.
type Config struct {
	// Dir holds the server's files (its log); a temporary directory by default.
	Dir string
	// Password, when set, is required of every client (requirepass).
	Password string
	// TLS, when set, makes the server take TLS only, with this certificate and key (PEM
	// files); clients are not asked for certificates.
	TLS *TLSFiles
	// Args are further arguments to redis-server ("--maxmemory", "1mb", …).
	Args []string
}

// TLSFiles are the PEM files of a TLS server.
type TLSFiles struct{ Cert, Key, CA string }

// Binary is the redis-server found on PATH (or in /usr/sbin), or an error that says it is
// missing.
func Binary() (string, error) {
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/sbin/redis-server"); err == nil {
		return "/usr/sbin/redis-server", nil
	}
	return "", errors.New("redis-server is not installed (apt-get install redis-server)")
}

// Start starts a server for t, stopped when t ends; t is skipped when there is no
// redis-server, and failed when it does not start.
func Start(t testing.TB, cfg Config) *Server {
	t.Helper()
	if _, err := Binary(); err != nil {
		t.Skip(err)
	}
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	s, err := StartServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// StartServer starts a server; the caller stops it with Stop.
func StartServer(cfg Config) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	if cfg.Dir == "" {
		return nil, errors.New("redistest: Config.Dir is required")
	}
	var last error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s, err := start(bin, port, cfg)
		if err == nil {
			return s, nil
		}
		last = err // the port was taken meanwhile, most likely: choose another
	}
	return nil, last
}

func start(bin string, port int, cfg Config) (*Server, error) {
	args := []string{"--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", cfg.Dir,
		"--logfile", "", "--daemonize", "no", "--protected-mode", "no"}
	if cfg.TLS != nil {
		args = append(args, "--port", "0", "--tls-port", strconv.Itoa(port), "--tls-cert-file", cfg.TLS.Cert,
			"--tls-key-file", cfg.TLS.Key, "--tls-ca-cert-file", cfg.TLS.CA, "--tls-auth-clients", "no")
	} else {
		args = append(args, "--port", strconv.Itoa(port))
	}
	if cfg.Password != "" {
		args = append(args, "--requirepass", cfg.Password)
	}
	args = append(args, cfg.Args...)
	cmd := exec.Command(bin, args...)
	cmd.Dir = cfg.Dir
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting redis-server: %w", err)
	}
	s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Port: port, TLS: cfg.TLS != nil, cmd: cmd, done: make(chan struct{})}
	ready := make(chan struct{})
	var logMu sync.Mutex
	var log strings.Builder
	go func() {
		sc := bufio.NewScanner(out)
		said := false
		for sc.Scan() {
			logMu.Lock()
			if log.Len() < 64<<10 {
				log.WriteString(sc.Text() + "\n")
			}
			logMu.Unlock()
			if !said && strings.Contains(sc.Text(), "Ready to accept connections") {
				said = true
				close(ready)
			}
		}
	}()
	go func() {
		_ = cmd.Wait()
		close(s.done)
	}()
	select {
	case <-ready:
		return s, nil
	case <-s.done:
		logMu.Lock()
		defer logMu.Unlock()
		return nil, fmt.Errorf("redis-server on port %d exited at once:\n%s", port, log.String())
	case <-time.After(20 * time.Second):
		s.Stop()
		return nil, fmt.Errorf("redis-server on port %d did not become ready in 20s", port)
	}
}

// Stop stops the server (SIGKILL: nothing is kept anyway) and waits for it to exit.
func (s *Server) Stop() {
	s.once.Do(func() {
		_ = s.cmd.Process.Kill()
		<-s.done
	})
}

// URL is the address evtctl reads stream in db 0 by: redis://127.0.0.1:PORT/0/STREAM
// (rediss:// for a TLS server).
func (s *Server) URL(stream string) string {
	scheme := "redis"
	if s.TLS {
		scheme = "rediss"
	}
	return scheme + "://" + s.Addr + "/0/" + stream
}

// CLI runs redis-cli against the server with args and returns its output, trimmed; an error
// reply is an error.
func (s *Server) CLI(ctx context.Context, args ...string) (string, error) {
	bin, err := exec.LookPath("redis-cli")
	if err != nil {
		bin = filepath.Join(filepath.Dir(s.cmd.Path), "redis-cli")
	}
	full := append([]string{"-h", "127.0.0.1", "-p", strconv.Itoa(s.Port)}, args...)
	out, err := exec.CommandContext(ctx, bin, full...).CombinedOutput()
	text := strings.TrimSpace(string(out))
	if err == nil && (strings.HasPrefix(text, "ERR") || strings.HasPrefix(text, "WRONGTYPE") || strings.HasPrefix(text, "(error)")) {
		err = errors.New(text)
	}
	if err != nil {
		return text, fmt.Errorf("redis-cli %s: %v: %s", strings.Join(args, " "), err, text)
	}
	return text, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
