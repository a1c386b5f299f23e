package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/evtctl/evtctl/internal/english"
	"github.com/evtctl/evtctl/internal/eventlog"
	"github.com/evtctl/evtctl/internal/iostreams"
	"github.com/evtctl/evtctl/internal/jetstream"
	"github.com/evtctl/evtctl/internal/server"
)

// defaultListen is where `evtctl serve` listens and where the other commands look for a node.
const defaultListen = "127.0.0.1:7480"

type serveOptions struct {
	streams *iostreams.IOStreams

	Listen        string
	AddrFile      string
	DataDir       string
	Verify        bool
	Memory        bool
	Window        time.Duration
	MaxItems      uint64
	MaxBytes      byteSize
	SegmentSize   byteSize
	DedupeWindow  time.Duration
	Sync          string
	PageDefault   int
	PageMax       int
	WaitDefault   time.Duration
	WaitMax       time.Duration
	MaxBody       byteSize
	MaxWaiters    int
	MaxReads      int
	MaxScans      int
	MaxStreams    int
	BodyTimeout   time.Duration
	MaxBodyMemory byteSize
	MaxRPCMemory  byteSize
	MaxReply      byteSize
	ScanBudget    int64
	ReadToken     string
	IngestToken   string
	TLSCert       string
	TLSKey        string
	HeaderTimeout time.Duration
	PprofListen   string
	LogFormat     string
	LogLevel      string

	// The log on NATS JetStream (--store nats://...).
	Store        string
	NATSStream   string
	NATSSubject  string
	NATSReplicas int
	NATSCreds    string
	NATSNKey     string
	NATSUser     string
	NATSPassword string
	NATSToken    string
	NATSCA       string
	NATSCert     string
	NATSKey      string
	NATSManage   bool
	NATSAtomic   string
	NATSTimeout  time.Duration
}

// natsStore reports whether --store names NATS servers rather than the embedded log.
func (o *serveOptions) natsStore() bool {
	for _, scheme := range []string{"nats://", "tls://", "ws://", "wss://"} {
		if strings.HasPrefix(strings.ToLower(o.Store), scheme) {
			return true
		}
	}
	return false
}

func newCmdServe(streams *iostreams.IOStreams) *cobra.Command {
	opts := &serveOptions{streams: streams, MaxBytes: 1 << 30, MaxBody: 8 << 20, MaxBodyMemory: 64 << 20, MaxRPCMemory: 16 << 20, MaxReply: 4 << 20, SegmentSize: 64 << 20}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run an event log node that serves the events API",
		Long: `Run an evtctl node: a durable log of CloudEvents that serves the "events" method of
Tendermint's ADR-075 and takes events over HTTP.

With no flags it listens on ` + defaultListen + ` and keeps its log in
` + defaultDataDirHelp() + `.
An event is acknowledged only once it is on disk (fsync, shared by the appends that arrive
together), so an acknowledged event survives a crash of the node or of the machine.

With --store nats://HOST:PORT the log lives in a NATS JetStream stream instead (file storage,
--nats-replicas copies), created or brought to the node's retention settings at start, so
that several nodes in front of one stream serve one log: every node hands out the same
cursor for the same event, and a reader may move between them. It needs nats-server 2.10 or
later. With --nats-manage-stream=false the node serves a stream as it is, also one that
evtctl did not write: each message is presented as a CloudEvent, and the node takes events
only when --nats-subject names a subject the stream takes.

Damage to the log is never repaired by deleting what is intact: only a torn tail (the last
append cut short by a crash, never acknowledged) is cut back. A bad record, a missing or
shortened file, or acknowledged records missing at the end are fenced: the intact events
around them stay readable, the lost range is logged as an error and shown by /healthz
(degraded) and /metrics, and readers that reach it are told events were lost (tail --on-gap).
--verify reads the whole log in --data-dir, reports every damaged range and changes nothing:
it needs only read access (a read-only copy can be checked). It exits 0 when no event was
lost, 3 when some were, and 1 when the directory holds no log or the node would not open it.

Tokens may also be given in EVTCTL_READ_TOKEN and EVTCTL_INGEST_TOKEN, which keeps them out
of process listings; a NATS password or token in EVTCTL_NATS_PASSWORD or EVTCTL_NATS_TOKEN.`,
		Example: `  evtctl serve
  evtctl serve --memory --listen 127.0.0.1:0 --addr-file node.addr
  evtctl serve --window 72h --max-bytes 10GiB --ingest-token "$TOKEN"
  evtctl serve --verify --data-dir /var/lib/evtctl
  evtctl serve --store nats://nats1:4222,nats://nats2:4222,nats://nats3:4222 \
      --nats-replicas 3 --nats-creds evtctl.creds
  evtctl serve --store nats://nats1:4222 --nats-stream ORDERS \
      --nats-manage-stream=false`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Memory && cmd.Flags().Changed("data-dir") {
				return usagef("--memory and --data-dir cannot be used together")
			}
			if (opts.TLSCert == "") != (opts.TLSKey == "") {
				return usagef("--tls-cert and --tls-key go together")
			}
			if err := checkStoreFlags(cmd.Flags(), opts); err != nil {
				return err
			}
			if opts.ReadToken == "" {
				opts.ReadToken = os.Getenv("EVTCTL_READ_TOKEN")
			}
			if opts.IngestToken == "" {
				opts.IngestToken = os.Getenv("EVTCTL_INGEST_TOKEN")
			}
			if opts.Verify && (opts.Memory || opts.natsStore()) {
				return usagef("--verify checks an embedded log on disk: give --data-dir (or none, for the default), not --memory or --store")
			}
			if opts.DataDir == "" && !opts.Memory && !opts.natsStore() {
				dir, err := defaultDataDir()
				if err != nil {
					return fmt.Errorf("finding a data directory: %w (give one with --data-dir, or use --memory)", err)
				}
				opts.DataDir = dir
			}
			if opts.Verify {
				return runVerify(opts)
			}
			return runServe(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Listen, "listen", defaultListen, "address to listen on (host:port; port 0 picks a free one)")
	f.StringVar(&opts.AddrFile, "addr-file", "", "write the address the node listens on to this file once it is ready")
	f.StringVar(&opts.DataDir, "data-dir", "", "directory of the durable log (default "+defaultDataDirHelp()+")")
	f.BoolVar(&opts.Memory, "memory", false, "keep the log in memory only: nothing survives a restart")
	f.BoolVar(&opts.Verify, "verify", false, "read the whole log in --data-dir, report every damaged range and exit (0: nothing lost, 3: events lost); changes nothing, needs only read access")
	f.DurationVar(&opts.Window, "window", 7*24*time.Hour, "drop events older than this (0 keeps them regardless of age)")
	f.Uint64Var(&opts.MaxItems, "max-items", 0, "keep at most this many events (0: no limit)")
	f.Var(&opts.MaxBytes, "max-bytes", "keep at most about this many bytes of events (0: no limit)")
	f.Var(&opts.SegmentSize, "segment-size", "start a new segment file of the embedded log at about this size")
	f.DurationVar(&opts.DedupeWindow, "dedupe-window", 10*time.Minute, "acknowledge a repeated (source, id) with its first cursor for this long (0 disables)")
	enumVar(f, &opts.Sync, "sync", "always", "when to acknowledge appends: {values}",
		choice{name: "always", help: "after fsync"}, choice{name: "none", help: "after write; survives kill -9, not power loss"})
	f.IntVar(&opts.PageDefault, "page-default", 10, "events per page when a request asks for none")
	f.IntVar(&opts.PageMax, "page-max", 1000, "most events per page")
	f.DurationVar(&opts.WaitDefault, "wait-default", time.Second, "long-poll wait when a request gives none")
	f.DurationVar(&opts.WaitMax, "wait-max", 30*time.Second, "longest long-poll wait")
	f.Var(&opts.MaxBody, "max-body", "largest ingest request body")
	f.IntVar(&opts.MaxWaiters, "max-waiters", 20000, "most long-polls waiting at once; more get a busy error")
	f.IntVar(&opts.MaxReads, "max-reads", 0, "pages built at once; more wait their turn (default 4 per CPU)")
	f.IntVar(&opts.MaxScans, "max-scans", 0, "filtered reads going on at once past a quick read's work, in a lane of their own so that they never hold up other reads; more wait their turn (default 1 per 2 CPUs)")
	f.IntVar(&opts.MaxStreams, "max-streams", 64, "streams (GET /events/stream, which replay uses) served at once, about 320 KiB each; more are answered 503 with Retry-After")
	f.DurationVar(&opts.BodyTimeout, "body-timeout", 10*time.Second, "answer 408 to a request whose body takes longer than this to arrive")
	f.Var(&opts.MaxBodyMemory, "max-body-memory", "ingest and signal bodies held at once, all requests together, counted as their bytes arrive; more are refused with 503")
	f.Var(&opts.MaxRPCMemory, "max-rpc-body-memory", "JSON-RPC request bodies (readers') held at once, apart from --max-body-memory; more are refused with 503")
	f.Var(&opts.MaxReply, "max-reply", "most bytes of events in the reply to one request, all calls of a batch together; a longer page is cut short")
	f.Int64Var(&opts.ScanBudget, "scan-budget", 1_500_000_000, "filter work per request: bytes of events examined times the filter's passes over them; a read that spends it answers with where to resume")
	f.StringVar(&opts.ReadToken, "read-token", "", "require this bearer token to read events and metrics")
	f.StringVar(&opts.IngestToken, "ingest-token", "", "require this bearer token to send events")
	f.StringVar(&opts.TLSCert, "tls-cert", "", "serve HTTPS with this certificate (PEM)")
	f.StringVar(&opts.TLSKey, "tls-key", "", "private key for --tls-cert (PEM)")
	f.DurationVar(&opts.HeaderTimeout, "header-timeout", 5*time.Second, "close connections whose request headers take longer than this")
	f.StringVar(&opts.PprofListen, "pprof-listen", "", "serve Go's profiles (net/http/pprof) on this address, for measuring the node")
	_ = f.MarkHidden("pprof-listen")
	enumVar(f, &opts.LogFormat, "log-format", "text", "log format on stderr: {values}", choice{name: "text"}, choice{name: "json"})
	enumVar(f, &opts.LogLevel, "log-level", "info", "log level: {values}", choice{name: "debug"}, choice{name: "info"}, choice{name: "warn"}, choice{name: "error"})

	f.StringVar(&opts.Store, "store", "embedded", "where the log lives: embedded (--data-dir or --memory), or NATS JetStream servers: nats://HOST:PORT (tls://, several comma separated)")
	f.StringVar(&opts.NATSStream, "nats-stream", "EVTCTL", "JetStream stream that holds the log")
	f.StringVar(&opts.NATSSubject, "nats-subject", "", `subject ingested events are published on (default "evtctl." and the stream name in lower case); on a stream that does not take the default, the node takes events only with this flag`)
	f.IntVar(&opts.NATSReplicas, "nats-replicas", 1, "copies of the stream the JetStream cluster keeps (1 to 5; 3 survives the loss of a server)")
	f.StringVar(&opts.NATSCreds, "nats-creds", "", "NATS credentials file (JWT and NKey seed)")
	f.StringVar(&opts.NATSNKey, "nats-nkey", "", "NATS NKey seed file")
	f.StringVar(&opts.NATSUser, "nats-user", "", "NATS user name; the password in EVTCTL_NATS_PASSWORD or --nats-password")
	f.StringVar(&opts.NATSPassword, "nats-password", "", "NATS password (prefer EVTCTL_NATS_PASSWORD)")
	f.StringVar(&opts.NATSToken, "nats-token", "", "NATS authentication token (prefer EVTCTL_NATS_TOKEN)")
	f.StringVar(&opts.NATSCA, "nats-ca", "", "CA certificates (PEM) that sign the NATS servers' certificates")
	f.StringVar(&opts.NATSCert, "nats-cert", "", "client certificate (PEM) for NATS TLS")
	f.StringVar(&opts.NATSKey, "nats-key", "", "private key (PEM) for --nats-cert")
	f.BoolVar(&opts.NATSManage, "nats-manage-stream", true, "create the stream if it is missing and bring its limits, replicas and settings to this node's; false: use it as it is (also a stream evtctl did not write)")
	enumVar(f, &opts.NATSAtomic, "nats-atomic-batches", "auto", "store each ingest batch all-or-nothing with atomic batch publish (nats-server 2.12+): {values}",
		choice{name: "auto", help: "atomic on a replicated stream, event by event on a single replica, whichever is faster"},
		choice{name: "true", help: "always atomic"}, choice{name: "false", help: "event by event, pipelined"})
	f.Lookup("nats-atomic-batches").NoOptDefVal = "true"
	f.DurationVar(&opts.NATSTimeout, "nats-timeout", 5*time.Second, "how long to wait for each reply from NATS; at start, six times this for NATS and the stream to be ready")
	return cmd
}

// checkStoreFlags refuses flags that do not apply to the chosen store.
func checkStoreFlags(f *pflag.FlagSet, opts *serveOptions) error {
	var natsFlags []string
	f.Visit(func(fl *pflag.Flag) {
		if strings.HasPrefix(fl.Name, "nats-") {
			natsFlags = append(natsFlags, "--"+fl.Name)
		}
	})
	if !opts.natsStore() {
		if opts.Store != "embedded" && opts.Store != "" {
			return usagef("--store must be embedded or a NATS URL such as nats://127.0.0.1:4222, got %q", opts.Store)
		}
		if len(natsFlags) > 0 {
			return usagef("%s: NATS flags are for a log on NATS JetStream; add --store nats://HOST:PORT", strings.Join(natsFlags, ", "))
		}
		return nil
	}
	for _, name := range []string{"data-dir", "memory", "sync", "segment-size"} {
		if f.Changed(name) {
			return usagef("--%s applies to the embedded store; with a log on NATS JetStream the NATS servers keep it (their sync_interval decides when it is fsynced)", name)
		}
	}
	if opts.NATSReplicas < 1 || opts.NATSReplicas > 5 {
		return usagef("--nats-replicas must be 1 to 5, got %d", opts.NATSReplicas)
	}
	if (opts.NATSCert == "") != (opts.NATSKey == "") {
		return usagef("--nats-cert and --nats-key go together")
	}
	if opts.NATSPassword == "" {
		opts.NATSPassword = os.Getenv("EVTCTL_NATS_PASSWORD")
	}
	if opts.NATSToken == "" {
		opts.NATSToken = os.Getenv("EVTCTL_NATS_TOKEN")
	}
	if opts.NATSTimeout <= 0 {
		return usagef("--nats-timeout must be positive")
	}
	switch opts.NATSAtomic {
	case "auto", "true", "false":
	default:
		return usagef("--nats-atomic-batches must be auto, true or false, got %q", opts.NATSAtomic)
	}
	return nil
}

// openStore opens the log the options name, and says where it is for the start-up line.
func openStore(ctx context.Context, opts *serveOptions, logger *slog.Logger) (eventlog.Store, string, error) {
	if opts.natsStore() {
		var nopts []nats.Option
		if opts.NATSCreds != "" {
			nopts = append(nopts, nats.UserCredentials(opts.NATSCreds))
		}
		if opts.NATSNKey != "" {
			o, err := nats.NkeyOptionFromSeed(opts.NATSNKey)
			if err != nil {
				return nil, "", usagef("--nats-nkey: %v", err)
			}
			nopts = append(nopts, o)
		}
		if opts.NATSUser != "" {
			nopts = append(nopts, nats.UserInfo(opts.NATSUser, opts.NATSPassword))
		}
		if opts.NATSToken != "" {
			nopts = append(nopts, nats.Token(opts.NATSToken))
		}
		if opts.NATSCA != "" {
			nopts = append(nopts, nats.RootCAs(opts.NATSCA))
		}
		if opts.NATSCert != "" {
			nopts = append(nopts, nats.ClientCert(opts.NATSCert, opts.NATSKey))
		}
		jopts := jetstream.Options{
			URL:          opts.Store,
			Stream:       opts.NATSStream,
			Subject:      opts.NATSSubject,
			Replicas:     opts.NATSReplicas,
			Window:       opts.Window,
			MaxItems:     opts.MaxItems,
			MaxBytes:     int64(opts.MaxBytes),
			DedupeWindow: opts.DedupeWindow,
			Manage:       opts.NATSManage,
			Batches:      natsBatches(opts.NATSAtomic),
			Timeout:      opts.NATSTimeout,
			StartupWait:  6 * opts.NATSTimeout,
			NATSOptions:  nopts,
			Logger:       logger,
		}
		if opts.DedupeWindow == 0 {
			jopts.DedupeWindow = -1
		}
		if os.Getenv("GOGC") == "" {
			// The log lives in NATS: the node's own heap is the requests in flight, a few
			// MiB, and collecting it when it has grown 400% rather than Go's default 100%
			// was measured to take a quarter off the node's CPU per event at ingest, for a
			// few MiB more. GOGC, when set, decides.
			debug.SetGCPercent(400)
		}
		logger.Info("connecting to NATS JetStream", "url", jetstream.Redact(opts.Store), "stream", opts.NATSStream)
		st, err := jetstream.Open(ctx, jopts)
		if err != nil {
			return nil, "", err
		}
		return st, st.Describe(), nil
	}
	lopts := eventlog.Options{
		Window:       opts.Window,
		MaxItems:     opts.MaxItems,
		MaxBytes:     int64(opts.MaxBytes),
		DedupeWindow: opts.DedupeWindow,
		SegmentBytes: int64(opts.SegmentSize),
		Logger:       logger,
	}
	if opts.DedupeWindow == 0 {
		lopts.DedupeWindow = -1
	}
	if opts.Sync == "none" {
		lopts.Sync = eventlog.SyncNone
	}
	where := "memory (nothing survives a restart)"
	if !opts.Memory {
		lopts.Dir = opts.DataDir
		where = opts.DataDir
	}
	st, err := eventlog.Open(lopts)
	if err != nil {
		return nil, "", err
	}
	return st, where, nil
}

// natsBatches reads --nats-atomic-batches (checked by checkStoreFlags).
func natsBatches(v string) jetstream.Batches {
	switch v {
	case "true":
		return jetstream.BatchesAtomic
	case "false":
		return jetstream.BatchesEach
	}
	return jetstream.BatchesAuto
}

// defaultDataDir is under the user's state directory: $XDG_STATE_HOME/evtctl/node or
// ~/.local/state/evtctl/node; ~/Library/Application Support/evtctl/node on macOS;
// %LocalAppData%\evtctl\node on Windows.
func defaultDataDir() (string, error) {
	switch runtime.GOOS {
	case "windows":
		if d := os.Getenv("LocalAppData"); d != "" {
			return filepath.Join(d, "evtctl", "node"), nil
		}
	case "darwin":
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		return filepath.Join(home, "Library", "Application Support", "evtctl", "node"), nil
	default:
		if d := os.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
			return filepath.Join(d, "evtctl", "node"), nil
		}
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, ".local", "state", "evtctl", "node"), nil
}

func defaultDataDirHelp() string {
	switch runtime.GOOS {
	case "windows":
		return `%LocalAppData%\evtctl\node`
	case "darwin":
		return "~/Library/Application Support/evtctl/node"
	}
	return "$XDG_STATE_HOME/evtctl/node, or ~/.local/state/evtctl/node"
}

func newLogger(w *iostreams.IOStreams, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, usagef("--log-level: %v", err)
	}
	ho := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w.ErrOut, ho)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w.ErrOut, ho)), nil
	}
	return nil, usagef("--log-format must be text or json, got %q", format)
}

func runServe(ctx context.Context, opts *serveOptions) error {
	logger, err := newLogger(opts.streams, opts.LogFormat, opts.LogLevel)
	if err != nil {
		return err
	}
	store, where, err := openStore(ctx, opts, logger)
	if err != nil {
		return err
	}
	defer store.Close()

	srv := server.New(server.Config{
		Store:        store,
		DefaultItems: opts.PageDefault,
		MaxItems:     opts.PageMax,
		DefaultWait:  opts.WaitDefault,
		MaxWait:      opts.WaitMax,
		MaxBody:      int64(opts.MaxBody),
		MaxWaiters:   opts.MaxWaiters,
		MaxReads:     opts.MaxReads,
		MaxScans:     opts.MaxScans,
		MaxStreams:   opts.MaxStreams,
		ReadToken:    opts.ReadToken,
		IngestToken:  opts.IngestToken,
		Logger:       logger,
		Version:      versionString(),

		BodyTimeout:      opts.BodyTimeout,
		MaxBodyMemory:    int64(opts.MaxBodyMemory),
		MaxRPCBodyMemory: int64(opts.MaxRPCMemory),
		MaxReplyBytes:    int(opts.MaxReply),
		ScanBudget:       opts.ScanBudget,
	})
	if opts.TLSCert != "" {
		// Check the key pair before binding, so that a bad one leaves no address file.
		if _, err := tls.LoadX509KeyPair(opts.TLSCert, opts.TLSKey); err != nil {
			return usagef("--tls-cert/--tls-key: %v", err)
		}
	}
	ln, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", opts.Listen, err)
	}
	hs := srv.HTTPServer(opts.Listen, opts.HeaderTimeout)
	scheme := "http"
	if opts.TLSCert != "" {
		scheme = "https"
	}
	addr := ln.Addr().String()
	st := store.Stats()
	logger.Info("evtctl node listening", "url", scheme+"://"+addr, "log", where, "events", st.Items, "newest", st.Newest.String())
	if tcp, ok := ln.Addr().(*net.TCPAddr); ok && !tcp.IP.IsLoopback() && (opts.ReadToken == "" || opts.IngestToken == "") {
		logger.Warn("listening beyond this machine without --read-token and --ingest-token: anyone who can reach it can read or send events")
	}
	if opts.AddrFile != "" {
		if err := os.WriteFile(opts.AddrFile, []byte(addr+"\n"), 0o644); err != nil {
			ln.Close()
			return fmt.Errorf("--addr-file: %w", err)
		}
	}

	if opts.PprofListen != "" {
		stop, err := servePprof(opts.PprofListen, logger)
		if err != nil {
			ln.Close()
			return err
		}
		defer stop()
	}

	errc := make(chan error, 1)
	if opts.TLSCert != "" {
		// TLS connections stay with net/http: their long-polls wait in goroutines.
		go func() { errc <- hs.ServeTLS(ln, opts.TLSCert, opts.TLSKey) }()
	} else {
		pl := srv.Attach(hs, ln)
		logger.Debug("long-polls wait parked out of the HTTP server", "parked", srv.Parks())
		go func() { errc <- hs.Serve(pl) }()
	}
	select {
	case err := <-errc:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	logger.Info("shutting down: waking waiting readers and finishing requests in progress")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		logger.Warn("shutting down: replies to long-polls still being written at the deadline were cut off", "err", err)
	}
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		logger.Warn("requests still running at the shutdown deadline were cut off", "err", err)
	}
	if err := store.Close(); err != nil {
		return fmt.Errorf("closing the event log: %w", err)
	}
	logger.Info("stopped")
	return nil
}

// runVerify is serve --verify: it reads the log in opts.DataDir and reports what it finds.
func runVerify(opts *serveOptions) error {
	r, err := eventlog.Verify(opts.DataDir)
	if err != nil {
		return err
	}
	out := opts.streams.Out
	fmt.Fprintf(out, "%s: %s in %s", r.Dir, english.Plural(int(r.Records), "intact event"), english.Plural(r.Files, "segment file"))
	if r.LowMark > 0 {
		fmt.Fprintf(out, "; the log starts at sequence number %d", r.LowMark)
	}
	if r.HighMark > 0 {
		fmt.Fprintf(out, "; the highest sequence number committed is %d", r.HighMark)
	}
	fmt.Fprintln(out)
	for _, d := range r.Damage {
		fmt.Fprintf(out, "damaged: %s\n", d)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(out, "note: %s\n", n)
	}
	for _, p := range r.Problems {
		fmt.Fprintf(out, "problem: %s\n", p)
	}
	if len(r.Problems) > 0 {
		return errors.New("the node will not open this log as it is: see the problems above")
	}
	if r.Clean() {
		fmt.Fprintln(out, "no event was lost")
		return nil
	}
	var lost uint64
	for _, d := range r.Damage {
		lost += d.Count()
	}
	return &statusError{exitLost, fmt.Errorf("%s lost in %s; the node serves the intact events around them and tells readers of the loss", english.Plural(int(lost), "event"), english.Plural(len(r.Damage), "damaged range"))}
}

// servePprof serves Go's profiles on addr, on a server of their own, until stop is called.
func servePprof(addr string, logger *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--pprof-listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	logger.Info("serving profiles", "url", "http://"+ln.Addr().String()+"/debug/pprof/")
	return func() { hs.Close() }, nil
}
