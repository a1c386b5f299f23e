//go:build !linux

package eventlog

import "os"

// dataSync makes a file's data durable.
func dataSync(f *os.File) error { return f.Sync() }
