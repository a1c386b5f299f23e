package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evtctl/evtctl/internal/eventlog"
	"github.com/evtctl/evtctl/internal/server"
)

// forward --on-gap fail ends with the gap's exit status every time: the reader's reason to
// stop the forwarder wins over the end of the events it handed over, which comes with it.
func TestForwardOnGapFailStatus(t *testing.T) {
	t.Parallel()
	url, _ := inProcessNode(t, eventlog.Options{MaxItems: 5}, server.Config{}, nil)
	evs := ingestEvents(t, url, 0, 20, 20) // the node keeps the last 5
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer recv.Close()
	dir := t.TempDir()
	for i := range 20 {
		code, _, stderr := runCLI(t, "forward", "--node", url, "--to", recv.URL, "--from", evs[2].cursor.String(),
			"--state", filepath.Join(dir, fmt.Sprint(i)), "--until-caught-up", "--on-gap", "fail")
		if code != exitLost || !strings.Contains(stderr, "events were lost: the node no longer holds events after cursor "+evs[2].cursor.String()) {
			t.Fatalf("run %d: exit %d: %s", i, code, stderr)
		}
	}
}
