//go:build !unix

package cevent

func processCPU() int64 { return 0 }
