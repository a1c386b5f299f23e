package redisstream

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/evtctl/evtctl/internal/peer"
	"github.com/evtctl/evtctl/pkg/client"
)

func init() {
	// go-redis would log a failed dial on stderr; the failure is the caller's to tell.
	redis.SetLogger(quiet{})
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// conn is a connection pool to the server of one stream, and what it has learnt of it.
type conn struct {
	addr Address
	node string // addr.String(): no password
	rdb  *redis.Client
	// answered: the server has answered a command since the pool was made. Until it has, a
	// failure that waiting does not mend (nothing listens, TLS does not fit) is final.
	answered atomic.Bool
}

// dial makes the pool of addr's server; it does not connect yet. The password is the
// address's, else opts.Token; TLS (rediss://) trusts opts.CAFile beside the system's
// authorities, or nothing is checked with opts.Insecure.
func dial(a Address, opts client.Options) (*conn, error) {
	ro := &redis.Options{
		Addr:     a.Host,
		Username: a.User,
		Password: a.Password,
		DB:       a.DB,
		// The client retries as its caller says (client.Retryable); go-redis does not.
		MaxRetries:    -1,
		DialerRetries: 1,
		DialTimeout:   10 * time.Second,
		// A page's reply is read within this; a long-poll adds its wait to it.
		ReadTimeout:           30 * time.Second,
		WriteTimeout:          30 * time.Second,
		ContextTimeoutEnabled: true,
		PoolSize:              8,
		DisableIdentity:       true,
		// Neither is in Redis 7.0: leave them unasked.
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}
	if ro.Password == "" {
		ro.Password = opts.Token
	}
	if a.TLS {
		cfg, err := client.TLSConfig(opts.CAFile, opts.Insecure)
		if err != nil {
			return nil, err
		}
		if cfg == nil {
			cfg = &tls.Config{}
		}
		host, _, _ := net.SplitHostPort(a.Host)
		cfg.ServerName = host
		cfg.MinVersion = tls.VersionTLS12
		ro.TLSConfig = cfg
	}
	return &conn{addr: a, node: a.String(), rdb: redis.NewClient(ro)}, nil
}

// ok notes that the server answered.
func (c *conn) ok() { c.answered.Store(true) }

// failure words a failed command and decides whether it is final (see client.Retryable):
// the server's refusals that waiting does not mend, and, before the server has ever
// answered, an address where nothing can answer.
func (c *conn) failure(ctx context.Context, what string, err error) error {
	if err == nil || ctx.Err() != nil {
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) {
		// Not the caller's deadline: a connection or a reply that timed out.
		if !c.answered.Load() && c.addr.TLS {
			return &client.FinalError{Err: fmt.Errorf("%s did not complete a TLS handshake in time: is it a port without TLS (redis://)?", c.node)}
		}
		return fmt.Errorf("%s: %s: timed out", c.node, what)
	}
	var se *ServerError
	var re redis.Error
	msg := ""
	switch {
	case errors.As(err, &se):
		msg = se.Msg
	case errors.As(err, &re) && !isTransport(err):
		msg = re.Error()
	}
	if msg != "" {
		c.ok()
		return c.serverError(what, msg, err)
	}
	if errors.Is(err, errProtocol) {
		return &client.FinalError{Err: fmt.Errorf("%s: %s: %w", c.node, what, err)}
	}
	if c.answered.Load() {
		return fmt.Errorf("%s: %s: %w", c.node, what, err)
	}
	switch peer.Classify(err) {
	case peer.NoListener:
		return &client.FinalError{Err: fmt.Errorf("no Redis server answers at %s (connection refused)", c.node)}
	case peer.NoSuchHost:
		return &client.FinalError{Err: fmt.Errorf("cannot find the host of %s: %w", c.node, err)}
	case peer.NotTLS, peer.PlainHTTP:
		return &client.FinalError{Err: fmt.Errorf("%s does not answer in TLS (redis:// is for a server without TLS): %w", c.node, err)}
	case peer.Certificate, peer.TLSFailure:
		return &client.FinalError{Err: fmt.Errorf("TLS with %s failed: %w (give the authority that signed its certificate with --ca-file, or --insecure to skip the check)", c.node, err)}
	}
	if !c.addr.TLS && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)) {
		return &client.FinalError{Err: fmt.Errorf("%s closed the connection without answering: is it a TLS port (rediss://)? %w", c.node, err)}
	}
	return fmt.Errorf("%s: %s: %w", c.node, what, err)
}

// isTransport reports an error of the connection rather than the server's answer.
func isTransport(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// serverError words an error the server answered with.
func (c *conn) serverError(what, msg string, err error) error {
	code, _, _ := strings.Cut(msg, " ")
	key := c.addr.Stream
	switch code {
	case "LOADING", "BUSY", "TRYAGAIN", "MASTERDOWN", "CLUSTERDOWN", "NOREPLICAS", "OOM":
		return fmt.Errorf("%s: %s: the server answered %q", c.node, what, msg)
	case "NOAUTH", "WRONGPASS", "NOPERM":
		return &client.FinalError{Err: fmt.Errorf("%s refused %s: %s (the password goes in the address, redis://USER:PASSWORD@HOST/…, or in --token)", c.node, what, msg)}
	case "WRONGTYPE":
		return &client.FinalError{Err: fmt.Errorf("%s: key %q is not a stream", c.node, key)}
	case "MOVED", "ASK":
		return &client.FinalError{Err: fmt.Errorf("%s is a node of a Redis Cluster (%s): evtctl reads a stream from a single server, or a cluster node that holds its key", c.node, msg)}
	}
	if strings.Contains(msg, "unknown command") {
		return &client.FinalError{Err: fmt.Errorf("%s cannot serve a stream's reader: %s (Redis 7.0 or later is needed)", c.node, msg)}
	}
	if strings.Contains(msg, "DB index is out of range") {
		return &client.FinalError{Err: fmt.Errorf("%s: the server has no database %d: %s", c.node, c.addr.DB, msg)}
	}
	return &client.FinalError{Err: fmt.Errorf("%s: %s: the server answered %q", c.node, what, msg)}
}
