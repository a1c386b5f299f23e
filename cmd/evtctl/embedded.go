package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/evtctl/evtctl/internal/eventlog"
	"github.com/evtctl/evtctl/internal/server"
)

// embeddedOptions configure a node run inside the evtctl process (demo, bench --embedded).
type embeddedOptions struct {
	Listen string // host:port; empty means a free loopback port
	Dir    string // durable log directory; empty keeps the log in memory
	Sync   eventlog.SyncMode
	Logger *slog.Logger // nil discards the node's log
	// MaxWaiters bounds concurrent long-polls (0: the server's default).
	MaxWaiters int
	// PageMax caps items per page (0: 1000, as evtctl serve has it).
	PageMax int
}

// embeddedNode is a running in-process node.
type embeddedNode struct {
	URL   string // http://host:port
	Store eventlog.Store

	srv  *server.Server
	hs   *http.Server
	errc chan error
}

// startEmbedded starts a node on a loopback port. Close stops it.
func startEmbedded(opts embeddedOptions) (*embeddedNode, error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	store, err := eventlog.Open(eventlog.Options{Dir: opts.Dir, Sync: opts.Sync, Logger: logger})
	if err != nil {
		return nil, err
	}
	listen := opts.Listen
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("listen on %s: %w", listen, err)
	}
	if opts.PageMax == 0 {
		opts.PageMax = 1000
	}
	srv := server.New(server.Config{
		Store:      store,
		Logger:     logger,
		MaxWaiters: opts.MaxWaiters,
		MaxItems:   opts.PageMax,
		Version:    versionString(),
	})
	n := &embeddedNode{
		URL:   "http://" + ln.Addr().String(),
		Store: store,
		srv:   srv,
		hs:    srv.HTTPServer(ln.Addr().String(), 5*time.Second),
		errc:  make(chan error, 1),
	}
	go func() { n.errc <- n.hs.Serve(srv.Attach(n.hs, ln)) }()
	return n, nil
}

// Close wakes waiting readers, finishes requests in progress (bounded) and closes the log.
func (n *embeddedNode) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = n.srv.Shutdown(ctx) // what it leaves, hs.Shutdown reports too
	err := n.hs.Shutdown(ctx)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return errors.Join(err, n.Store.Close())
}
