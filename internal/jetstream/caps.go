package jetstream

import (
	"fmt"
	"strconv"
	"strings"
)

// MinServerVersion is the oldest nats-server line the store works with: the one that
// added what it relies on beyond 2.9 (consumer create with a name and subject, used by
// the ordered consumers, and stream info of the 2.10 shape).
const MinServerVersion = "2.10.0"

// caps is what the NATS server this node is connected to can do, learnt from its version
// when the connection is made (and made again). In a cluster of mixed versions other
// servers answer some requests; those answers are checked one by one (see directGet).
type caps struct {
	version string // as the server reports it
	// batchGet: direct gets of several messages in one request, ended by an end-of-batch
	// status (2.11).
	batchGet bool
	// atomic: atomic batch publish (2.12).
	atomic bool
}

// capsOf returns the capabilities of a server of the given version, or an error when the
// version is older than MinServerVersion.
func capsOf(version string) (caps, error) {
	c := caps{version: version}
	if !versionAtLeast(version, MinServerVersion) {
		return c, &versionError{version}
	}
	c.batchGet = versionAtLeast(version, "2.11.0")
	c.atomic = versionAtLeast(version, "2.12.0")
	return c, nil
}

// versionError refuses a server older than MinServerVersion.
type versionError struct{ found string }

func (e *versionError) Error() string {
	found := e.found
	if found == "" {
		found = "of an unknown version"
	}
	return fmt.Sprintf("the NATS server is nats-server %s; evtctl needs nats-server %s or later (any 2.10, 2.11, 2.12 or newer release)", found, strings.TrimSuffix(MinServerVersion, ".0"))
}

// versionAtLeast reports whether version ("2.11.3", "v2.12.0-RC.1") is at least min
// ("2.11.0"). A pre-release counts as its release. A version that does not parse is not.
func versionAtLeast(version, min string) bool {
	a, ok1 := parseVersion(version)
	b, ok2 := parseVersion(min)
	if !ok1 || !ok2 {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return a[i] > b[i]
		}
	}
	return true
}

func parseVersion(v string) ([3]int, bool) {
	var out [3]int
	v = strings.TrimPrefix(strings.TrimSpace(v), "v")
	if i := strings.IndexAny(v, "-+ "); i >= 0 {
		v = v[:i]
	}
	parts := strings.Split(v, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return out, false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return out, false
		}
		out[i] = n
	}
	return out, true
}
