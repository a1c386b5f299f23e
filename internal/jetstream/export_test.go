package jetstream

import (
	"testing"
	"time"
)

// ReadPath makes ascending scans of at least min messages stream from a consumer, and
// shorter ones use direct gets, until the test ends.
func ReadPath(t testing.TB, min uint64) {
	prev := readerMinOverride
	readerMinOverride = min
	t.Cleanup(func() { readerMinOverride = prev })
}

// UseReadPath is ReadPath for one store, which tests running at once can each set.
func UseReadPath(s *Store, min uint64) { s.readerMinFor.Store(min) }

// SharedFor makes a node publish in shared mode for d after it sees another writer, until
// the test ends.
func SharedFor(t testing.TB, d time.Duration) {
	prev := sharedFor
	sharedFor = d
	t.Cleanup(func() { sharedFor = prev })
}

// AckEvery is how many chained messages one answer stands for at most.
const AckEvery = ackEvery

// InFlight is how many messages the store's publisher holds room for: published and not
// yet answered for.
func InFlight(s *Store) int { return len(s.pubs.room) }
