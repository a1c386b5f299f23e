package parker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/evtctl/evtctl/internal/rawpoll"
)

// Outcome is what became of a request or a call the parker had its Call serve.
type Outcome uint8

const (
	// Answered: the whole HTTP response is appended to the buffer given.
	Answered Outcome = iota
	// Waits: the call waits until its head moves or its wait runs out (Call.Waits).
	Waits
	// Declined: the request is net/http's to serve, from its first byte.
	Declined
	// Later: serving the request reads the log, which the event loop does not do: a worker
	// serves it (only with inline set).
	Later
)

// Request is a request the parser read. Its fields point into the parker's buffer: they
// are valid during Call.Serve only.
type Request struct {
	Get    bool   // GET /events…, else POST /
	Target []byte // the request-target, as sent
	Query  []byte // of a GET: what follows the '?' of its target
	Host   []byte
	Auth   []byte // the Authorization header's value; nil when there is none
	Close  bool   // Connection: close
	Body   []byte
	Start  time.Time // when the parser read it
}

// Call is the server's side of the calls made on one connection, one at a time. The parker
// calls its methods from one goroutine at a time.
type Call interface {
	// Serve serves req: it answers it (Answered, the whole response appended to out, with
	// Connection: close when closeAfter), leaves it to net/http (Declined), or counts the call
	// among the waiters (Waits). With inline set the caller is the event loop, which must
	// neither wait nor read the log: Later leaves the request to a worker.
	Serve(ctx context.Context, req *Request, inline, closeAfter bool, out []byte) ([]byte, Outcome)
	// Wake reads again for a waiting call after its head moved: Answered, or Waits on (then
	// Waits tells on what).
	Wake(ctx context.Context, closeAfter bool, out []byte) ([]byte, Outcome)
	// Expire answers a waiting call with what it has: its wait has run out, or nothing may
	// wait any more.
	Expire(closeAfter bool, out []byte) []byte
	// HangUp ends a waiting call whose client has gone.
	HangUp()
	// Waits says what a waiting call waits for: the channel that closes when its head moves,
	// and when its wait runs out.
	Waits() (head <-chan struct{}, due time.Time)
}

// Poller watches the descriptors of connections (rawpoll.Poller).
type Poller interface {
	Add(fd int, key uint64) error
	Del(fd int) error
	Wait(evs []rawpoll.Event) (int, error)
	Close() error
}

// Config configures a Parker.
type Config struct {
	// NewCall makes the Call of a connection whose first request the parker reads.
	NewCall func() Call
	Logger  *slog.Logger // default: none
	// Poller watches the connections; default: an epoll instance of the parker's own.
	Poller Poller
}

// Parker holds connections out of net/http while their calls wait, and between requests.
type Parker struct {
	cfg     Config
	log     *slog.Logger
	poll    Poller
	ctx     context.Context // of the calls served: ends when the parker has shut down
	cancel  context.CancelFunc
	tasks   taskQueue
	done    chan struct{} // closed to stop the event loop and the timer
	loops   sync.WaitGroup
	closing atomic.Bool // mirrors closed, for reads outside mu
	off     atomic.Bool // mirrors failed, for reads outside mu

	mu      sync.Mutex
	closed  bool
	failed  bool     // the poller failed: the parker takes no connection and holds none
	conns   []*conn  // by slot
	free    []uint32 // slots
	gen     uint32
	owned   int // connections held: adopted and not yet closed or handed back
	writing int // of those, connections whose reply a goroutine of its own is finishing
	lists   map[<-chan struct{}]*waitList
	dl      deadlines
	drained chan struct{} // closed when closed and nothing is held
}

var (
	errClosed = errors.New("the node is shutting down")
	errOff    = errors.New("long-polls wait in the HTTP server: watching their connections failed")
)

// New starts a Parker: its event loop, its timer and its workers. Where connections cannot
// be watched (elsewhere than Linux) it returns an error satisfying errors.ErrUnsupported.
func New(cfg Config) (*Parker, error) {
	if cfg.NewCall == nil {
		return nil, errors.New("parker: Config.NewCall is nil")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	poll := cfg.Poller
	if poll == nil {
		rp, err := rawpoll.New()
		if err != nil {
			return nil, err
		}
		poll = rp
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Parker{
		cfg: cfg, log: cfg.Logger, poll: poll, ctx: ctx, cancel: cancel,
		done:    make(chan struct{}),
		lists:   make(map[<-chan struct{}]*waitList),
		drained: make(chan struct{}),
	}
	p.dl.init()
	p.tasks.init()
	p.loops.Add(2)
	go p.eventLoop(&worker{p: p, inline: true})
	go p.timerLoop()
	for range max(2, runtime.GOMAXPROCS(0)) {
		go (&worker{p: p}).work()
	}
	return p, nil
}

// Held is the number of connections the parker holds: those of waiting calls, those between
// requests, and those a worker serves.
func (p *Parker) Held() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.owned
}

// QueuedReads is the number of connections whose requests wait for a worker.
func (p *Parker) QueuedReads() int { return p.tasks.queuedReads() }

// Off says whether the parker has switched itself off, its poller having failed: it holds no
// connection and takes none.
func (p *Parker) Off() bool { return p.off.Load() }

// fail switches the parker off after its poller failed: without it, the parker cannot
// tell when a client sends or hangs up. Every waiting call is answered at once (with what
// it has, as a wait that runs out is) and its connection handed to net/http, as are idle
// connections at once and busy ones once their request is answered; no connection is taken
// from now on, and long-polls wait in their requests' goroutines.
func (p *Parker) fail(err error) {
	p.log.Error("long-polls wait in the HTTP server from now on: watching their connections failed", "err", err)
	p.mu.Lock()
	p.failed = true
	p.off.Store(true)
	_ = p.poll.Close()
	waits, idles := p.takeAllLocked()
	p.mu.Unlock()
	for _, pc := range idles {
		b := pc.buf
		pc.buf = nil
		p.handBack(pc, b)
	}
	p.dispatch(taskExpire, waits)
}

// Shutdown answers every waiting call at once (with what it has, as a wait that runs out
// does), closes idle connections, and returns once the parker holds no connection but those
// whose reply is still being written (within the write timeout) to a client that does not
// read it; or when ctx ends first (a read of the log holding a worker up), with its error.
// Calls after the first return at once.
func (p *Parker) Shutdown(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.closing.Store(true)
	waits, idles := p.takeAllLocked()
	p.checkDrainedLocked()
	p.mu.Unlock()
	for _, pc := range idles {
		p.close(pc)
	}
	p.dispatch(taskExpire, waits)
	var err error
	select {
	case <-p.drained:
	case <-ctx.Done():
		err = fmt.Errorf("long-polls still being answered were left: %w", ctx.Err())
	}
	_ = p.poll.Close()
	close(p.done)
	p.loops.Wait()
	p.tasks.close()
	p.cancel()
	return err
}

// takeAllLocked ends every wait list, taking its calls (waits), and takes every idle
// connection off its deadline (idles), both now busy: what failing and shutting down answer
// and close. p.mu is held.
func (p *Parker) takeAllLocked() (waits, idles []*conn) {
	for ch, wl := range p.lists {
		waits = p.takeListLocked(wl, waits)
		delete(p.lists, ch)
		close(wl.gone)
	}
	for _, pc := range p.conns {
		if pc != nil && pc.state == connIdle {
			p.dl.remove(pc)
			pc.state = connBusy
			idles = append(idles, pc)
		}
	}
	return waits, idles
}
