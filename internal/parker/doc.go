// Package parker holds waiting HTTP long-polls out of net/http, in a small struct each and no
// goroutine, on an event loop of its own. Linux only: elsewhere New returns an error
// satisfying errors.ErrUnsupported, and long-polls wait in net/http's goroutines.
//
// # Why
//
// A long-poll served by net/http keeps, while it waits, the goroutine that serves its
// connection, the goroutine net/http runs beside a handler to notice a hang-up, and their
// buffers: about 21 kB a waiter. A parked one holds its socket's descriptor (out of Go's
// poller), its call, its deadline and a few links: about 1 kB.
//
// Why this and not an event-loop HTTP server for Go (such as nbio's nbhttp): every request but
// the long-poll keeps net/http, its TLS and its limits, unchanged, and nothing is added to the
// dependencies; what is new is confined to the one request that waits.
//
// # What a server asks of it, and what it asks of the server
//
// The server asks the parker for three things:
//
//   - to adopt connections: Attach wraps a listener. The parker reads each new connection's
//     requests first, with a parser of its own for the requests long-polling clients send (a
//     JSON-RPC call to POST /, GET /events?…) in their plainest HTTP/1.1 form with the whole
//     request at hand (parseRequest). Whatever else comes — another endpoint, a batch,
//     chunked bodies, Expect, HTTP/1.0, a request in pieces — goes to net/http, with the bytes
//     read so far, through the listener's Accept, and net/http serves it as it always has.
//     The parser is fuzzed against http.ReadRequest and an http.Server (FuzzParseRequest):
//     what it takes, they take and read the same way.
//   - to park a call net/http has read, which must wait: Listener.Park takes its connection
//     out of net/http (Hijack). Via says whether a request's connection can be parked.
//   - to wake the calls waiting on a head of the log when it moves: a waiting call names the
//     channel that closes then (Call.Waits), and one goroutine per channel, not per waiter,
//     hands the calls waiting on it to the workers, which ask each again (Call.Wake).
//
// The parker asks the server's Call, one per connection, what a request asks and for the
// replies (Serve, Wake, Expire, HangUp): tokens, parameters, reads of the log and the bytes of
// a reply are the server's; connections, waits, deadlines and writing replies are the
// parker's. A reply is a whole HTTP response, which the server makes byte for byte as
// net/http would write it for the same handler.
//
// # Inside
//
// Its sections, each in a file of its own:
//
//   - connections (conns.go): a conn, in one of three states changed under Parker.mu: busy (a
//     worker, a writer or a handler holds it), parked (its call waits: on a wait list and a
//     deadline) or idle (between requests: on a deadline, waiting for input).
//   - waits (waits.go): a wait list per head channel, and its watcher. A client that hangs up
//     while its call waits frees its place among the waiters at once.
//   - the event loop (loop.go): epoll, edge-triggered, for input and hang-up, waited on in a
//     system call of its own rather than in Go's poller (rawpoll.Poller), so that input that
//     comes while the loop is busy wakes no thread and is taken in its next look. It reads
//     the requests that come on idle connections and parks those it can without reading the
//     log (Call.Serve with inline set: a long-poll that asks what another call has just found
//     nothing for), leaving every other request to the workers. It never pauses: letting a
//     millisecond of requests gather after a look that found only calls it could park, or
//     waiting while the workers had replies to send, saved no more than 18% of a wake's CPU in
//     alternated pairs of `evtctl bench pollers` runs (often nothing), and delayed the first
//     request of every new connection, ingest included. It does give way: while wakes or
//     expiries wait for the workers, it yields its processor after each look
//     (runtime.Gosched), which waits for nothing (with no worker ready to run, it goes on at
//     once), so that the calls a head wakes are answered before the next long-polls of those
//     answered are read and parked. Beside two workers on two processors it otherwise took
//     its turn at every preemption: at 19,000 pollers it re-parked a median of about 9,300
//     next long-polls per wake while the wake's replies were still being written, about 2,600
//     when it gives way (24 rounds each, counted in a build instrumented for it). The wake's
//     p99 moved less than the noise of a 2-core machine shared with the bench's pollers
//     (medians of seven alternated pairs: 269 ms before, 254 ms after).
//   - workers (workers.go): a few goroutines, fed by a queue that never makes its caller wait:
//     nothing that watches connections, deadlines or heads waits for a worker, which may be
//     stuck in a read of a log that does not answer (a JetStream outage with thousands of
//     pollers). A request that reads the log is a task of its own, so that a read that hangs
//     holds up no other request while a worker is free; once MaxQueuedReads such requests
//     wait, the event loop hands further ones to net/http, which serves each in a goroutine
//     of its own. Waiters woken together go to the workers 32 to a task, each task holding
//     its part of the slice they were taken in: a wake allocates no task. A worker that has
//     answered a connection reads its next request itself once the event loop has seen it
//     come, never on the chance of it: of the parker's 133,003 reads in six rounds at 19,000
//     pollers none found nothing (EAGAIN), and with edge-triggered epoll nothing is re-armed.
//   - replies (replies.go): a reply is written whole with one write(2); what the socket cannot
//     take at once is finished by a goroutine of its own, within the write timeout. Sending
//     the replies of 32 waiters in one io_uring_enter saved 7–34% of a wake's CPU in
//     alternated pairs, under a quarter in half of them: too little for a second way of
//     writing every reply, with system calls the scheduler cannot see.
//   - deadlines (deadlines.go): waits and idle connections run out on one timer, over buckets
//     of 5 ms whose ticks are kept in a heap: a timer wheel that sleeps while no deadline
//     comes.
//   - the listener (listener.go): Attach's listener, through whose Accept net/http gets what
//     the parker does not keep. The HTTP server's timeouts apply to the connections the parker
//     holds as they do in net/http: ReadHeaderTimeout before a connection's first request,
//     IdleTimeout between requests, WriteTimeout to a reply.
//
// Should the poller fail, the parker logs it and switches itself off: every waiting call is
// answered with what it has, every connection handed to net/http, which serves all requests
// from then on, and none is taken any more. Shutdown answers every waiting call at once and
// waits for the replies as long as its context lets it.
//
// TLS connections are not parked (their bytes are crypto/tls's, and a waiting TLS long-poll
// costs what it did); neither are HTTP/1.0 requests, nor what the server does not hand over
// (a JSON-RPC batch).
package parker
