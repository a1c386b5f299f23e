//go:build !linux

package main

import "os"

// watchReader does nothing here: a command notices a closed stdout at its next write.
// (Linux's poll tells of a pipe without readers; elsewhere poll does not reliably.)
func watchReader(f *os.File, gone func()) (stop func()) { return func() {} }
