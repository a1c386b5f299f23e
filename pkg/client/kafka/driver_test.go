package kafka

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/evtctl/evtctl/pkg/client"
	"github.com/evtctl/evtctl/pkg/wire"
)

// TestCompare: positions grow along a read; a cursor is before a position that covers its
// record and after one that does not; cursors go by partition, then offset.
func TestCompare(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"", "0", -1},
		{"", "0,0,0", -1},
		{"", "0/0", -1},
		{"5,5,5", "5,5,5", 0},
		{"5,5,5", "5,6,5", -1},
		{"5,6,5", "5,5,5", 1},
		{"5,5", "5,5,0", -1}, // the topic grew: a partition it did not name counts as 0
		{"5,5", "5,5,3", -1},
		{"9,0", "0,10", -1}, // not ordered partition by partition: by the sum
		{"10,0", "0,10", 1}, // same sum: partition by partition
		{"99999999999999999,99999999999999999", "1,99999999999999999", 1},
		{"1/5", "4,5,6", 1},  // offset 5 is not below 5
		{"1/4", "4,5,6", -1}, // covered
		{"4,5,6", "1/4", 1},
		{"4,5,6", "1/5", -1},
		{"3/0", "4,5,6", 1}, // a partition the position does not name
		{"1/9", "2/0", -1},
		{"2/0", "1/9", 1},
		{"1/9", "1/10", -1},
		{"1/10", "1/10", 0},
	} {
		if got := Compare(c.a, c.b); got != c.want {
			t.Errorf("Compare(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
	// A total order: sorting positions taken along a read keeps the read's order.
	read := []string{"", "0,0,0", "1,0,0", "1,0,1", "1,2,1", "4,2,1", "4,2,1,0", "4,2,1,7"}
	shuffled := slices.Clone(read)
	slices.Reverse(shuffled)
	slices.SortFunc(shuffled, Compare)
	if !slices.Equal(shuffled, read) {
		t.Errorf("sorted %v, want %v", shuffled, read)
	}
}

// TestPosBefore: the position before an item leaves out its record alone.
func TestPosBefore(t *testing.T) {
	s := &Source{}
	for _, c := range []struct {
		cur, pos, want string
	}{
		{"1/4", "7,5,9", "7,4,9"},
		{"0/0", "1", "0"},
		{"2/8", "7,5,12", "7,5,8"}, // records after it were gone (a gap): before it is still 8
		{"5/1", "7,5,9", ""},       // not of this position
		{"bad", "7,5,9", ""},
	} {
		if got := s.PosBefore(client.Item{Item: wire.Item{Cursor: c.cur}, Pos: c.pos}); got != c.want {
			t.Errorf("PosBefore(%s at %s) = %q, want %q", c.cur, c.pos, got, c.want)
		}
	}
}

// TestOpen: a kafka:// address opens through the client with a context's settings; the
// address's own options win; what does not fit is refused before anything is reached.
func TestOpen(t *testing.T) {
	open := func(node string, opts client.Options) (*Source, error) {
		opts.Node = node
		c, err := client.New(opts)
		if err != nil {
			return nil, err
		}
		return c.Source().(*Source), nil
	}
	_, ca := testCert(t)
	s, err := open("kafka://b1,b2:9093/orders?sasl.username=url", client.Options{Settings: map[string]string{
		"security.protocol": "SASL_SSL", "SASL.Mechanisms": "scram-sha-512", "sasl.username": "ctx", "sasl.password": "secret",
	}, CAFile: ca})
	if err != nil {
		t.Fatal(err)
	}
	if c := s.cfg; c.SASLUsername != "url" || c.SASLPassword != "secret" || c.SASLMechanism != MechScramSHA512 ||
		c.SecurityProtocol != SASLSSL || c.SSLCALocation != ca || strings.Join(c.Brokers, ",") != "b1:9092,b2:9093" {
		t.Errorf("config %+v", c)
	}
	if s.Node() != "kafka://b1:9092,b2:9093/orders" {
		t.Errorf("Node() = %q", s.Node())
	}
	for _, c := range []struct {
		node string
		opts client.Options
		want string
	}{
		{"kafka://b/t", client.Options{Token: "tok"}, "a Kafka topic takes no bearer token"},
		{"kafka://b/t", client.Options{CAFile: "/ca.pem"}, "TLS options need security.protocol=SSL or SASL_SSL"},
		{"kafka://b/t", client.Options{Settings: map[string]string{"fetch.max.bytes": "1"}}, `unknown Kafka option "fetch.max.bytes"`},
		{"kafka://b/t?security.protocol=SASL_SSL", client.Options{Settings: map[string]string{"sasl.mechanism": "PLAIN"}}, "SASL needs sasl.username and sasl.password"},
		{"kafka://b/", client.Options{}, "names no topic"},
	} {
		_, err := open(c.node, c.opts)
		var ae *AddressError
		if !errors.As(err, &ae) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %+v: %v, want an AddressError with %q", c.node, c.opts, err, c.want)
		}
	}
	if !client.IsCursor("2/1234") || !client.IsCursor("1235,988,1020") || !client.IsCursor("7") || client.IsCursor("1,,2") || client.IsCursor("01,2") {
		t.Error("client.IsCursor does not take a topic's cursors and positions as they are written")
	}
}

// TestErrorsFinalForClient: what Retryable refuses, client.Retryable refuses too, through
// every method the client calls.
func TestErrorsFinalForClient(t *testing.T) {
	t.Parallel()
	k := newCluster(t)
	s := k.source("nosuch")
	ctx := ctxT(t)
	_, _, err := s.Bounds(ctx)
	if err == nil || client.Retryable(err) {
		t.Errorf("Bounds of a topic that does not exist: %v, retryable %v", err, client.Retryable(err))
	}
	if _, err := s.At(ctx, time.Now()); err == nil || client.Retryable(err) {
		t.Errorf("At of a topic that does not exist: %v, retryable %v", err, client.Retryable(err))
	}
	if _, err := s.Identity(ctx, "0"); err == nil || client.Retryable(err) {
		t.Errorf("Identity of a topic that does not exist: %v, retryable %v", err, client.Retryable(err))
	}
	if _, err := s.Page(context.Background(), client.PageRequest{Max: 1, Query: "type ="}); err == nil || client.Retryable(err) {
		t.Errorf("a query that does not compile: %v", err)
	}
}
