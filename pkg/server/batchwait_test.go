package server

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/evtctl/evtctl/pkg/eventlog"
)

// A batch of long-polls shares one wait, so it is answered within the write timeout.
func TestBatchOfLongPollsSharesOneWait(t *testing.T) {
	st, _ := eventlog.Open(eventlog.Options{})
	defer st.Close()
	s := New(Config{Store: st, MaxWait: 300 * time.Millisecond})
	call := `{"jsonrpc":"2.0","id":1,"method":"events","params":{"waitTime":300000000}}`
	body := "[" + strings.Repeat(call+",", 7) + call + "]"
	start := time.Now()
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("POST", "/", strings.NewReader(body)))
	el := time.Since(start)
	if n := len(gjson.Get(rec.Body.String(), "#.result").Array()); n != 8 {
		t.Fatalf("%d results, want 8: %s", n, rec.Body.String())
	}
	if el > 2*300*time.Millisecond {
		t.Fatalf("a batch of 8 long-polls took %v; they should share one 300ms wait", el)
	}
}
