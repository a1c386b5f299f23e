package jetstream

import "testing"

// ReadPath makes ascending scans of at least min messages stream from a consumer, and
// shorter ones use direct gets, until the test ends.
func ReadPath(t testing.TB, min uint64) {
	prev := readerMinOverride
	readerMinOverride = min
	t.Cleanup(func() { readerMinOverride = prev })
}
