package main

import (
	"os"
	"runtime/debug"
	"testing"
)

// A replay collects garbage at bulkGCPercent while it runs, unless GOGC is set, and puts
// the target back after.
func TestBulkGC(t *testing.T) {
	t.Setenv("GOGC", "")
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)

	restore := bulkGC() // GOGC is set (to "", which is 100): left alone
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("with GOGC set, the target is %d", got)
	}
	restore()

	os.Unsetenv("GOGC")
	restore = bulkGC()
	if got := debug.SetGCPercent(bulkGCPercent); got != bulkGCPercent {
		t.Errorf("without GOGC, the target is %d, want %d", got, bulkGCPercent)
	}
	restore()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("after the replay, the target is %d, want 100", got)
	}
}
