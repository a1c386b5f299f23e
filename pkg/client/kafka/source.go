package kafka

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/evtctl/evtctl/pkg/client"
	"github.com/evtctl/evtctl/pkg/wire"
)

// lost is what a forward page found lost after the position it started from: records of
// some partitions that went before the reader examined them. A compacted topic's holes are
// not lost records and are never reported.
type lost struct {
	after          string // the position the page started from
	oldest, newest string // every partition's log start and end, as seen then
	parts          []partLoss
}

// partLoss is what one partition lost: offsets from up to, not including, to; to is -1 when
// the partition cannot tell (its log was truncated).
type partLoss struct {
	partition int32
	from, to  int64
	why       string
}

func (l *lost) add(p partLoss) { l.parts = append(l.parts, p) }

// gap is the loss as the client reports it: the count when every partition can tell it,
// and each partition's offsets in Detail.
func (l *lost) gap() *client.Gap {
	if l == nil {
		return nil
	}
	g := &client.Gap{Kind: client.GapLost, After: l.after, Oldest: l.oldest, Newest: l.newest}
	parts := make([]string, 0, len(l.parts))
	known := true
	for _, p := range l.parts {
		switch {
		case p.to < 0:
			known = false
			parts = append(parts, fmt.Sprintf("partition %d: %s", p.partition, p.why))
		case p.to-p.from == 1:
			g.Lost++
			parts = append(parts, fmt.Sprintf("partition %d: offset %d (1 record) is gone, %s", p.partition, p.from, p.why))
		default:
			g.Lost += uint64(p.to - p.from)
			parts = append(parts, fmt.Sprintf("partition %d: offsets %d–%d (%d records) are gone, %s", p.partition, p.from, p.to-1, p.to-p.from, p.why))
		}
	}
	if !known {
		g.Lost = 0
	}
	g.Detail = strings.Join(parts, "; ")
	return g
}

// belowStart says why records below a partition's log start are gone.
func belowStart(start int64) string {
	return fmt.Sprintf("below the partition's log start, %d (retention or deleted records)", start)
}

// Source reads one topic of one cluster. It keeps one client for its life: forward pages
// continue a consumer that fetches ahead (partitions assigned directly, no consumer
// group), so a tail or a replay fetches while it writes. Its methods are safe for
// concurrent use; forward pages are served one at a time.
type Source struct {
	cfg  Config
	node string
	cl   *kgo.Client // consumes for forward pages, and asks for metadata and offsets
	adm  *kadm.Client
	dec  kgo.Decompressor
	opts []kgo.Opt // cl's connection options

	// direct fetches the records of backward pages. It is a client of its own, made on
	// first need: franz-go sends a client's fetches to a broker on one connection, where
	// they would wait behind the consumer's long-polls.
	directOnce sync.Once
	direct     *kgo.Client
	directErr  error

	answered atomic.Bool // the cluster has answered a request

	qmu   sync.Mutex
	lastQ *matcher

	mmu   sync.Mutex // guards marks
	marks marks

	fmu sync.Mutex // one forward page at a time; guards fw
	fw  forward
}

// marks are what the source last saw of the topic.
type marks struct {
	id    kadm.TopicID
	start []int64 // log start offset by partition
	end   []int64 // last stable offset by partition
	seen  time.Time
}

// New returns a source for cfg, which must be valid (see Config.Validate). It connects on
// first use; Close releases it.
func New(cfg Config) (*Source, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	opts, err := cfg.clientOpts()
	if err != nil {
		return nil, err
	}
	// franz-go answers metadata requests from what it learned within MetadataMinAge: a
	// topic's new partitions, or a new topic under its name, are seen that late at most.
	opts = append(opts, kgo.RetryTimeout(retryTimeout), kgo.MetadataMinAge(250*time.Millisecond))
	base := opts
	opts = append(opts[:len(opts):len(opts)],
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(), // their offsets count in positions
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
		kgo.FetchMaxWait(fetchMaxWait),
		kgo.FetchMaxBytes(fetchMaxBytes),
		kgo.FetchMaxPartitionBytes(fetchMaxPartitionBytes),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, addrErrorf("kafka: %v", err)
	}
	s := &Source{cfg: cfg, node: cfg.Node(), cl: cl, adm: kadm.NewClient(cl), dec: kgo.DefaultDecompressor(), opts: base}
	s.fw.dec = newDecoder(cfg.Topic)
	return s, nil
}

// Client settings.
const (
	fetchMaxWait  = 5 * time.Second
	fetchMaxBytes = 16 << 20
	// fetchMaxPartitionBytes is half the Kafka default: the limit is on the compressed
	// batches, and a fetch of several partitions of compressed JSON holds tens of
	// megabytes of records once decompressed, which a forward reader keeps while it merges
	// the partitions by time (three fetches' worth of records, at times). Half of it still
	// brings thousands of records a partition a fetch, with half the memory held.
	fetchMaxPartitionBytes = 512 << 10
	retryTimeout           = 15 * time.Second
	// catchUpWait bounds a page without Wait that waits for records the partitions are
	// known to hold.
	catchUpWait = 30 * time.Second
	// growthCheck is how often a forward reader looks for partitions added to the topic.
	growthCheck = 10 * time.Second
)

// Close releases the source's connections.
func (s *Source) Close() {
	s.directOnce.Do(func() { s.directErr = errClosed }) // none made after this
	if s.direct != nil {
		s.direct.Close()
	}
	s.cl.Close()
}

// directClient is the client for backward pages' fetches.
func (s *Source) directClient() (*kgo.Client, error) {
	s.directOnce.Do(func() {
		s.direct, s.directErr = kgo.NewClient(s.opts...)
	})
	return s.direct, s.directErr
}

// Node is the topic's address for messages and checkpoints: kafka://BROKERS/TOPIC,
// without options or credentials.
func (s *Source) Node() string { return s.node }

func (s *Source) matcher(q string) (*matcher, error) {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	if s.lastQ != nil && s.lastQ.src == q {
		return s.lastQ, nil
	}
	m, err := compileQuery(q)
	if err != nil {
		return nil, err
	}
	s.lastQ = m
	return m, nil
}

// idText is a topic's id as Kafka prints it (URL-safe base64): a topic deleted and made
// again under its name has another, and positions in the old one mean nothing in the new.
// It is "" when the cluster does not give topic ids.
func idText(id kadm.TopicID) string {
	if id == (kadm.TopicID{}) {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString(id[:])
}

// Page returns one page of the topic's items (see client.Source). Errors for which
// client.Retryable is true may pass (the caller retries with backoff); others are final.
func (s *Source) Page(ctx context.Context, r client.PageRequest) (*client.Page, error) {
	if r.Max < 1 {
		return nil, final(errors.New("kafka: a page needs Max of at least 1"))
	}
	m, err := s.matcher(r.Query)
	if err != nil {
		return nil, final(&client.QueryError{Query: r.Query, Language: "evtctl's filter language", Err: err})
	}
	var p *client.Page
	if r.Backward {
		p, err = s.backward(ctx, r, m)
	} else {
		p, err = s.forwardPage(ctx, r, m)
	}
	if err != nil {
		return nil, final(s.classify(err))
	}
	return p, nil
}

// topic reads the topic's metadata.
func (s *Source) topic(ctx context.Context) (kadm.TopicDetail, error) {
	tds, err := s.adm.ListTopics(ctx, s.cfg.Topic)
	if err != nil {
		return kadm.TopicDetail{}, s.classify(err)
	}
	s.answered.Store(true)
	td, ok := tds[s.cfg.Topic]
	if !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
		return kadm.TopicDetail{}, &TopicError{Node: s.node, Msg: fmt.Sprintf("topic %q does not exist", s.cfg.Topic)}
	}
	if td.Err != nil {
		return kadm.TopicDetail{}, s.classify(td.Err)
	}
	if len(td.Partitions) == 0 {
		return kadm.TopicDetail{}, &TopicError{Node: s.node, Msg: fmt.Sprintf("topic %q has no partitions", s.cfg.Topic)}
	}
	return td, nil
}

// refresh lists every partition's log start and end offsets.
func (s *Source) refresh(ctx context.Context) (marks, error) {
	td, err := s.topic(ctx)
	if err != nil {
		return marks{}, err
	}
	n := len(td.Partitions)
	mk := marks{id: td.ID, start: make([]int64, n), end: make([]int64, n), seen: time.Now()}
	starts, err := s.adm.ListStartOffsets(ctx, s.cfg.Topic)
	if err == nil {
		err = fill(mk.start, starts, s.cfg.Topic)
	}
	if err != nil {
		return marks{}, err
	}
	ends, err := s.adm.ListCommittedOffsets(ctx, s.cfg.Topic)
	if err == nil {
		err = fill(mk.end, ends, s.cfg.Topic)
	}
	if err != nil {
		return marks{}, err
	}
	s.mmu.Lock()
	if s.marks.id != (kadm.TopicID{}) && mk.id != (kadm.TopicID{}) && s.marks.id != mk.id {
		s.mmu.Unlock()
		return marks{}, &TopicError{Node: s.node, Msg: fmt.Sprintf("topic %q was deleted and made again while it was read", s.cfg.Topic)}
	}
	s.marks = mk.clone() // note writes the source's copy while the caller reads its own
	s.mmu.Unlock()
	return mk, nil
}

// fill copies listed offsets into dst by partition.
func fill(dst []int64, l kadm.ListedOffsets, topic string) error {
	for p := range dst {
		o, ok := l.Lookup(topic, int32(p))
		if !ok {
			return fmt.Errorf("kafka: no offset listed for partition %d of %q", p, topic)
		}
		if o.Err != nil {
			return o.Err
		}
		dst[p] = o.Offset
	}
	return nil
}

// known returns the marks as last seen (copies).
func (s *Source) known() marks {
	s.mmu.Lock()
	defer s.mmu.Unlock()
	return s.marks.clone()
}

// clone is a copy of m that shares no memory with it.
func (m marks) clone() marks {
	return marks{id: m.id, start: slices.Clone(m.start), end: slices.Clone(m.end), seen: m.seen}
}

// note records a partition's start and end offsets as a fetch reported them.
func (s *Source) note(p int32, start, end int64) {
	s.mmu.Lock()
	defer s.mmu.Unlock()
	if int(p) >= len(s.marks.end) {
		return
	}
	if start >= 0 && start > s.marks.start[p] {
		s.marks.start[p] = start
	}
	if end >= 0 {
		s.marks.end[p] = end
	}
}

func positionText(v []int64) string {
	if len(v) == 0 {
		return ""
	}
	return Position(v).String()
}

// TopicError is a topic that does not exist, was made again, or does not fit a position
// (another topic's, or one from before the topic was made again). It is final.
type TopicError struct {
	Node string
	Msg  string
}

func (e *TopicError) Error() string { return e.Msg + " on " + e.Node }

// ContactError is a failure to reach a cluster that has not answered yet, of a kind that
// waiting does not mend: nothing listens, the host does not resolve, TLS does not fit,
// or SASL refused the credentials. It is final.
type ContactError struct {
	Node string
	Err  error
}

func (e *ContactError) Error() string {
	return e.Node + ": " + e.Err.Error()
}

func (e *ContactError) Unwrap() error { return e.Err }

// classify turns an error of the client into one of this package's where it is final.
func (s *Source) classify(err error) error {
	return classify(err, s.node, s.cfg.Topic, s.answered.Load())
}

// classify turns an error of a client of the topic at node into one of this package's
// where it is final; answered says whether the cluster has answered before.
func classify(err error, node, topic string, answered bool) error {
	if err == nil {
		return nil
	}
	var te *TopicError
	var ce *ContactError
	var ae *AddressError
	var cue *CursorError
	var ge *GroupError
	if errors.As(err, &ge) || errors.As(err, &te) || errors.As(err, &ce) || errors.As(err, &ae) || errors.As(err, &cue) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	switch {
	case errors.Is(err, kerr.SaslAuthenticationFailed), errors.Is(err, kerr.IllegalSaslState),
		errors.Is(err, kerr.UnsupportedSaslMechanism):
		return &ContactError{Node: node, Err: fmt.Errorf("SASL authentication failed (%w)", err)}
	case errors.Is(err, kerr.TopicAuthorizationFailed), errors.Is(err, kerr.ClusterAuthorizationFailed),
		errors.Is(err, kerr.GroupAuthorizationFailed):
		return &ContactError{Node: node, Err: err}
	case errors.Is(err, kerr.UnknownTopicOrPartition), errors.Is(err, kerr.UnknownTopicID):
		return &TopicError{Node: node, Msg: fmt.Sprintf("topic %q does not exist (or was deleted)", topic)}
	}
	if !answered && firstContactFinal(err) {
		return &ContactError{Node: node, Err: err}
	}
	return err
}

// firstContactFinal reports failures that a cluster never reached cannot recover from
// by waiting: refused connections, unknown hosts, TLS that does not fit, a connection closed
// at once (SASL or TLS expected).
func firstContactFinal(err error) bool {
	var dnsErr *net.DNSError
	var opErr *net.OpError
	var certErr *tls.CertificateVerificationError
	var unknownAuth x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var recErr tls.RecordHeaderError
	var eofErr *kgo.ErrFirstReadEOF
	switch {
	case errors.As(err, &dnsErr), errors.As(err, &certErr), errors.As(err, &unknownAuth),
		errors.As(err, &hostErr), errors.As(err, &recErr), errors.As(err, &eofErr):
		return true
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return true
	}
	return false
}

// Retryable reports whether an error of the source may pass: transport failures and the
// cluster's retriable errors. Bad input (an address, a cursor, a query), a topic that does
// not exist or was made again, refused credentials and a *ContactError are final.
func Retryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, kgo.ErrClientClosed) || errors.Is(err, errClosed) {
		return false
	}
	var te *TopicError
	var ce *ContactError
	var ae *AddressError
	var cue *CursorError
	var ge *GroupError
	var pe *ProduceError
	if errors.As(err, &te) || errors.As(err, &ce) || errors.As(err, &ae) || errors.As(err, &cue) || errors.As(err, &ge) {
		return false
	}
	if errors.As(err, &pe) && pe.Invalid {
		return false
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Retriable
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, errStuck) ||
		errors.Is(err, kgo.ErrRecordTimeout) || errors.Is(err, kgo.ErrRecordRetries) {
		return true
	}
	return false
}

// finalError is an error of the source that retrying cannot mend: it says so to
// client.Retryable.
type finalError struct{ err error }

func (e *finalError) Error() string   { return e.err.Error() }
func (e *finalError) Unwrap() error   { return e.err }
func (e *finalError) Retryable() bool { return false }

// final marks err final for client.Retryable when Retryable says it is; errors that may
// pass, and the caller's own cancellation, are returned as they are.
func final(err error) error {
	var fe *finalError
	if err == nil || Retryable(err) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &fe) {
		return err
	}
	return &finalError{err}
}

// errStuck is a partition known to hold records that a fetch did not bring in time.
var errStuck = errors.New("kafka: the brokers did not return records the partitions are known to hold")

// itemOf makes the page item of a built record; pos is the position text after it.
func itemOf(b built, pos string) client.Item {
	raw := b.raw
	it := client.Item{
		Item: wire.Item{
			Cursor: unsafe.String(&raw[b.cur.start], b.cur.end-b.cur.start),
			Data:   raw[b.dataStart : len(raw)-1 : len(raw)-1],
			Event:  b.typ,
		},
		Raw:     raw,
		Pos:     pos,
		Compact: !b.spaced,
	}
	if it.Event == "" && b.ev.end-b.ev.start > 2 {
		it.Event = unsafe.String(&raw[b.ev.start+1], b.ev.end-b.ev.start-2)
	}
	return it
}

// arena hands out the memory of a page's items from chunks shared by many items: one
// allocation for many. With reuse, the chunks come from a pool and go back to it when the
// page is released.
type arena struct {
	buf    []byte   // the current chunk's free space
	chunks [][]byte // the pooled chunks handed out, with reuse
	reuse  bool
}

const (
	chunkSize = 256 << 10
	bigItem   = chunkSize / 8 // items larger than this get memory of their own
)

var chunks = sync.Pool{New: func() any { b := make([]byte, chunkSize); return &b }}

// alloc returns an empty slice with room for n bytes.
func (a *arena) alloc(n int) []byte {
	if n > bigItem {
		return make([]byte, 0, n)
	}
	if cap(a.buf)-len(a.buf) < n {
		if a.reuse {
			c := *chunks.Get().(*[]byte)
			a.chunks = append(a.chunks, c)
			a.buf = c[:0]
		} else {
			a.buf = make([]byte, 0, chunkSize)
		}
	}
	b := a.buf[len(a.buf) : len(a.buf) : len(a.buf)+n]
	return b
}

// took marks the first n bytes of what alloc returned last as used.
func (a *arena) took(b []byte) {
	if cap(a.buf) > len(a.buf) && len(b) > 0 && &a.buf[:len(a.buf)+1][len(a.buf)] == &b[0] {
		a.buf = a.buf[:len(a.buf)+len(b)]
	}
}

// text returns the text of position p.
func (a *arena) text(p []int64) string {
	b := Position(p).AppendText(a.alloc(len(p) * 20))
	a.took(b)
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// itemSlices are pages' item slices, with reuse: a page of a thousand items is a slice
// of over a hundred kilobytes, made for every page otherwise.
var itemSlices = sync.Pool{New: func() any { return new([]client.Item) }}

// maxPooledItems bounds the slices kept.
const maxPooledItems = 4096

// newItems returns an empty slice of items with room for n, from the pool with reuse.
func newItems(n int, reuse bool) []client.Item {
	if reuse {
		if s := *itemSlices.Get().(*[]client.Item); cap(s) >= n {
			return s[:0]
		}
	}
	return make([]client.Item, 0, n)
}

// releaseItems gives a page's item slice back to the pool, holding nothing.
func releaseItems(s []client.Item) {
	if cap(s) == 0 || cap(s) > maxPooledItems {
		return
	}
	clear(s[:cap(s)])
	s = s[:0]
	itemSlices.Put(&s)
}

// release gives pooled chunks back.
func (a *arena) release() {
	for _, c := range a.chunks {
		if poisonReleased {
			clear(c) // a use after release then reads zeros, not old data
		}
		chunks.Put(&c)
	}
	a.chunks, a.buf = nil, nil
}
