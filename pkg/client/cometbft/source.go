package cometbft

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/evtctl/evtctl/pkg/client"
	"github.com/evtctl/evtctl/pkg/filter"
)

// The source of a CometBFT chain behind the client's page interface: `cometbft+http://…`
// addresses, and http ones whose node turns out to be a CometBFT node (it has no events
// method and answers status as one).
func init() {
	client.Register(client.Driver{Schemes: []string{"cometbft+http", "cometbft+https"}, Open: open, Detect: detect, IsCursor: IsCursor})
}

func open(node string, opts client.Options) (client.Source, error) {
	opts.Node = node
	r, err := New(Options{Options: opts})
	if err != nil {
		return nil, err
	}
	return &source{r: r}, nil
}

func detect(ctx context.Context, base string, opts client.Options) (client.Source, error) {
	opts.Node = base
	st, err := Detect(ctx, Options{Options: opts})
	if err != nil {
		var not *NotCometBFTError
		if errors.As(err, &not) {
			return nil, nil
		}
		var de *DiscardError
		if errors.As(err, &de) {
			return nil, err // a CometBFT node that cannot serve its events
		}
		return nil, nil
	}
	r, err := New(Options{Options: opts})
	if err != nil {
		return nil, err
	}
	return &source{r: r, detected: st}, nil
}

// source is a chain read through a Reader.
type source struct {
	r        *Reader
	detected Status // what detection found, for Describe

	mu      sync.Mutex
	queries map[string]*filter.Query // compiled queries, by text
	ids     map[int64]Identity       // identities by height, for checkpoints
	commits map[int64]time.Time      // commit times by height, for bench latency
}

// Node is the node's address, any password redacted.
func (s *source) Node() string { return s.r.Node() }

// Describe says what the node turned out to be, once, for stderr.
func (s *source) Describe() string {
	st := s.detected
	return fmt.Sprintf("%s is a CometBFT node (v%s, chain %q): reading its blocks' events through block_results", s.r.Node(), st.Version, st.ChainID)
}

// Compare orders two positions of the chain.
func (s *source) Compare(a, b string) int { return CompareCursors(a, b) }

// CheckPosition refuses text that is no position of a chain.
func (s *source) CheckPosition(pos string) error {
	_, err := ParseCursor(pos)
	return err
}

// query compiles a query of Tendermint's language, which the chain's events are matched
// with on the client, as a subscription matches them.
func (s *source) query(q string) (*filter.Query, error) {
	if q == "" {
		return nil, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.queries[q]; ok {
		return c, nil
	}
	if err := filter.CheckTendermint(q); err != nil {
		return nil, &client.QueryError{Query: q, Language: "Tendermint's query language (a chain's events are matched as a subscription matches them)", Err: err}
	}
	c, err := filter.Compile(q)
	if err != nil {
		return nil, &client.QueryError{Query: q, Err: err}
	}
	if s.queries == nil {
		s.queries = map[string]*filter.Query{}
	}
	s.queries[q] = c
	return c, nil
}

func position(s string) (Position, error) {
	if s == "" {
		return Position{}, nil
	}
	return ParseCursor(s)
}

func text(p Position) string {
	if p.IsZero() {
		return ""
	}
	return p.String()
}

// just after an item: the Before of a page that must hold it.
func justAfter(p Position) Position {
	if p.Index >= EndIndex {
		return Position{Height: p.Height + 1}
	}
	return Position{Height: p.Height, Index: p.Index + 1}
}

// Page reads a page of the chain's items.
func (s *source) Page(ctx context.Context, r client.PageRequest) (*client.Page, error) {
	q, err := s.query(r.Query)
	if err != nil {
		return nil, err
	}
	after, err := position(r.After)
	if err != nil {
		return nil, err
	}
	if r.Backward {
		return s.backward(ctx, r, q, after)
	}
	req := PageRequest{After: after, Max: r.Max, Query: q, Wait: r.Wait}
	var end Position // inclusive end of the page's range, if any
	switch {
	case r.Before != "":
		b, err := ParseCursor(r.Before)
		if err != nil {
			return nil, err
		}
		if b.Index > 0 {
			end = Position{Height: b.Height, Index: b.Index - 1}
		} else {
			end = EndOf(b.Height - 1)
		}
		req.Wait = 0
	case r.Through != "":
		if end, err = ParseCursor(r.Through); err != nil {
			return nil, err
		}
		req.Wait = 0
	}
	var gap *client.Gap
	p, err := s.r.Forward(ctx, req)
	var ge *GapError
	if errors.As(err, &ge) {
		// Heights were pruned before the reader saw them: say so, and read on from the
		// oldest height the node keeps.
		if !r.NoGap {
			gap = &client.Gap{Kind: client.GapLost, After: r.After, Oldest: text(ge.Oldest), Detail: ge.lostText()}
		}
		req.After = ge.Resume()
		p, err = s.r.Forward(ctx, req)
	}
	if err != nil {
		return nil, err
	}
	out := &client.Page{Items: p.Items, More: p.More, Oldest: text(p.Oldest), Newest: text(p.Newest), Next: text(p.Next), Gap: gap}
	if !end.IsZero() {
		// The range ends at end: what lies past it is for no one here.
		n := len(out.Items)
		for n > 0 && CompareCursors(out.Items[n-1].Cursor, end.String()) > 0 {
			n--
		}
		if n < len(out.Items) || p.Next.Compare(end) >= 0 {
			out.Items, out.More, out.Next = out.Items[:n], false, end.String()
		}
	}
	return out, nil
}

// lostText says which heights a reader lost.
func (e *GapError) lostText() string {
	if e.From == e.To {
		return fmt.Sprintf("height %d is no longer served by the node (its oldest height with block results is %d)", e.From, e.Oldest.Height)
	}
	return fmt.Sprintf("heights %d to %d are no longer served by the node (its oldest height with block results is %d)", e.From, e.To, e.Oldest.Height)
}

func (s *source) backward(ctx context.Context, r client.PageRequest, q *filter.Query, after Position) (*client.Page, error) {
	req := PageRequest{Max: r.Max, Query: q}
	switch {
	case r.Before != "":
		b, err := ParseCursor(r.Before)
		if err != nil {
			return nil, err
		}
		req.Before = b
	case r.Through != "":
		t, err := ParseCursor(r.Through)
		if err != nil {
			return nil, err
		}
		req.Before = justAfter(t)
	}
	p, err := s.r.Backward(ctx, req)
	if err != nil {
		return nil, err
	}
	out := &client.Page{Items: p.Items, More: p.More, Oldest: text(p.Oldest), Newest: text(p.Newest), Next: text(p.Next)}
	if !after.IsZero() {
		// The range starts after `after`: older items are for no one here.
		n := 0
		for n < len(out.Items) && CompareCursors(out.Items[n].Cursor, r.After) > 0 {
			n++
		}
		if n < len(out.Items) || !p.Next.IsZero() && p.Next.Compare(justAfter(after)) <= 0 {
			out.Items, out.More = out.Items[:n], false
		}
	}
	return out, nil
}

// Bounds reports the chain's oldest and newest items as the node serves them.
func (s *source) Bounds(ctx context.Context) (string, string, error) {
	o, err := s.r.Oldest(ctx)
	if err != nil {
		return "", "", err
	}
	n, err := s.r.Newest(ctx)
	if err != nil {
		return "", "", err
	}
	return text(o), text(n), nil
}

// At is the position before the first block made at or after t.
func (s *source) At(ctx context.Context, t time.Time) (string, error) {
	p, err := s.r.Since(ctx, t)
	if err != nil {
		return "", err
	}
	return text(p), nil
}

// Identity is the chain's id and the hash of the block at the position's height.
func (s *source) Identity(ctx context.Context, pos string) (json.RawMessage, error) {
	p, err := ParseCursor(pos)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	id, ok := s.ids[p.Height]
	s.mu.Unlock()
	if !ok {
		if id, err = s.r.IdentityAt(ctx, p.Height); err != nil {
			return nil, err
		}
		s.mu.Lock()
		if s.ids == nil || len(s.ids) > 64 {
			s.ids = map[int64]Identity{}
		}
		s.ids[p.Height] = id
		s.mu.Unlock()
	}
	return json.Marshal(id)
}

// CheckIdentity refuses a position saved on another chain, or on this one before it was
// rolled back and rebuilt differently.
func (s *source) CheckIdentity(ctx context.Context, saved json.RawMessage) error {
	var id Identity
	if err := json.Unmarshal(saved, &id); err != nil || strings.TrimSpace(id.ChainID) == "" {
		return fmt.Errorf("the saved position's chain is unreadable (%s)", strings.TrimSpace(string(saved)))
	}
	_, err := s.r.CheckIdentity(ctx, id)
	return err
}
