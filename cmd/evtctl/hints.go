package main

import (
	"errors"
	"fmt"
	"net/http"
	neturl "net/url"
	"strings"

	"github.com/evtctl/evtctl/internal/deliver"
	"github.com/evtctl/evtctl/internal/eventlog"
	"github.com/evtctl/evtctl/internal/peer"
	"github.com/evtctl/evtctl/pkg/client"
)

// This file holds what evtctl says to do about a node or a receiver that cannot be used:
// every such hint is worded here.

// explain adds to err what to do about the node when the node could not be used (see
// client.ContactError) or refused the token; other errors pass unchanged.
func (o *nodeOptions) explain(err error) error {
	return explainNode(err, o.resolved, false)
}

// explainNode adds the hints for err, a failure of the node s names. ingest: events were
// being sent to it (emit), so a token it refuses is its ingest token.
func explainNode(err error, s nodeSettings, ingest bool) error {
	var (
		ce *client.ContactError
		he *client.HTTPError
		se *deliver.StatusError
	)
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ce):
		return withHints(err, nodeHints(ce, s)...)
	case readOnly(err):
		return err // the refusal says what would make the node take events
	case errors.As(err, &he) && (he.Status == http.StatusUnauthorized || he.Status == http.StatusForbidden),
		errors.As(err, &se) && (se.Status == http.StatusUnauthorized || se.Status == http.StatusForbidden):
		return withHints(err, tokenHint(s, ingest))
	}
	return err
}

// nodeHints are the lines that follow a ContactError: where the address came from, and
// what to do.
func nodeHints(ce *client.ContactError, s nodeSettings) []string {
	hints := originHint(s, ce.Node)
	switch ce.Kind {
	case client.NoNode:
		hints = append(hints, "Start a node with 'evtctl serve' (or 'evtctl demo', one with sample events), or point --node, $EVTCTL_NODE or a context (evtctl context add) at a running one.")
	case client.NoHost:
		hints = append(hints, "Check the host name: --node takes a URL (https://events.example.com) or host:port.")
	case client.TLSMismatch:
		hints = append(hints, tlsHint(ce.Err))
	case client.BadCertificate:
		hints = append(hints, "If you trust the node, give the authority that signed its certificate with --ca-file (or $EVTCTL_CA_FILE, or a context's ca-file); --insecure skips the check.")
	case client.NotEventsAPI:
		hints = append(hints, "--node wants the base URL of an evtctl node ('evtctl serve' listens on "+defaultListen+") or of a Tendermint node's RPC (http://HOST:26657).")
	}
	return hints
}

// originHint says where the node's address came from, unless the command line gave it.
func originHint(s nodeSettings, node string) []string {
	switch s.NodeFrom {
	case "":
		return []string{"No --node, $EVTCTL_NODE or context names a node, so evtctl tried the default, " + node + "."}
	case "--node":
		return nil
	}
	return []string{"The address comes from " + s.NodeFrom + "."}
}

// tlsHint says which scheme to use when http and https were mixed up.
func tlsHint(err error) string {
	var he *client.HTTPError
	var se *deliver.StatusError
	switch {
	case errors.As(err, &he), errors.As(err, &se):
		return "That port takes HTTPS: write https:// rather than http://."
	case peer.Classify(err) == peer.PlainHTTP:
		return "It speaks plain HTTP: write http:// rather than https://."
	}
	return "What answers there does not speak TLS: check the port, or write http:// rather than https://."
}

// tokenHint says how to give the token a node asked for.
func tokenHint(s nodeSettings, ingest bool) string {
	if ingest {
		return "Give the node's ingest token with --token, $EVTCTL_TOKEN or $EVTCTL_INGEST_TOKEN, or keep it in a context (evtctl context add NAME --node URL --ingest-token TOKEN)."
	}
	return "Give the node's read token with --token or $EVTCTL_TOKEN, or keep it in a context (evtctl context add NAME --node URL --token-stdin)."
}

// deliveryContact turns a failure to send to a target that has not answered (see
// deliver.Policy.FirstContactFinal), or that does not take events, into the error a person
// can act on, with its hints; nil for any other failure. node: the target is the node s
// names; otherwise it is the receiver at url (--to).
func deliveryContact(err error, node bool, s nodeSettings, url string) error {
	var se *deliver.StatusError
	kind := client.ContactKind(0)
	switch f := peer.Classify(err); {
	case errors.As(err, &se):
		if node && (se.Status == http.StatusNotFound || se.Status == http.StatusMethodNotAllowed || se.Status == http.StatusNotImplemented) {
			kind = client.NotEventsAPI
		}
	case f == peer.NoListener:
		kind = client.NoNode
	case f == peer.NoSuchHost:
		kind = client.NoHost
	case f == peer.PlainHTTP || f == peer.NotTLS:
		kind = client.TLSMismatch
	case f == peer.Certificate || f == peer.TLSFailure:
		kind = client.BadCertificate
	}
	if kind == 0 {
		return nil
	}
	if node {
		base, nerr := client.NormalizeNode(s.Node)
		if nerr != nil {
			base = s.Node
		}
		if kind == client.NotEventsAPI {
			return withHints(fmt.Errorf("%s does not take events: POST %s/events answered %v", base, base, se),
				append(originHint(s, base), "--node wants an evtctl node; to send to another CloudEvents receiver, give --to URL.")...)
		}
		ce := &client.ContactError{Node: base, Kind: kind, Err: err}
		return withHints(ce, nodeHints(ce, s)...)
	}
	switch kind {
	case client.NoNode:
		return withHints(fmt.Errorf("nothing answers at %s (connection refused)", url), "Check --to, and that the receiver is running.")
	case client.NoHost:
		return withHints(fmt.Errorf("cannot find the host of %s: %v", url, unwrapTransport(err)), "Check the host name in --to.")
	case client.TLSMismatch:
		return withHints(fmt.Errorf("TLS with %s failed: %v", url, unwrapTransport(err)), tlsHint(err))
	}
	return withHints(fmt.Errorf("TLS with %s failed: %v", url, unwrapTransport(err)),
		"If you trust the receiver, give the authority that signed its certificate with --ca-file; --insecure skips the check.")
}

// authHint says how to give the credentials a target refused (401, 403); nil for other
// failures.
func authHint(err error, node bool, s nodeSettings) []string {
	var se *deliver.StatusError
	if !errors.As(err, &se) || se.Status != http.StatusUnauthorized && se.Status != http.StatusForbidden {
		return nil
	}
	if node && readOnly(err) {
		return nil // the refusal says what would make the node take events
	}
	if node {
		return []string{tokenHint(s, true)}
	}
	return []string{"The receiver wants credentials: --token sends a bearer token, -H 'Authorization: ...' any other."}
}

// readOnly reports whether err is a node's refusal of events because its log takes none (a
// node serving a stream evtctl did not write): a 403 that no token changes.
func readOnly(err error) bool {
	var (
		he *client.HTTPError
		se *deliver.StatusError
	)
	ro := eventlog.ErrReadOnly.Error()
	switch {
	case errors.As(err, &he):
		return he.Status == http.StatusForbidden && strings.HasPrefix(he.Message, ro)
	case errors.As(err, &se):
		return se.Status == http.StatusForbidden && strings.HasPrefix(se.Reason, ro)
	}
	return false
}

// unwrapTransport is the transport failure inside err, without the request line that Go's
// HTTP client and the sender put before it.
func unwrapTransport(err error) error {
	var ue *neturl.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
