package emit

import "net/http"

// Group is events of one request, each with its number (its line of input, or its place
// in the run).
type Group struct {
	Events [][]byte
	Nums   []int
}

// Part returns events lo to hi-1 of b and their numbers.
func (b *Batch) Part(lo, hi int) Group {
	var p Group
	for i := lo; i < hi; i++ {
		p.Events, p.Nums = append(p.Events, b.Event(i)), append(p.Nums, b.Num(i))
	}
	return p
}

// SendFailure is a request that failed: the events it was delivering when it failed (the
// one, or a whole batch), and why.
type SendFailure struct {
	Err error
	Group
}

func (f *SendFailure) Error() string { return f.Err.Error() }
func (f *SendFailure) Unwrap() error { return f.Err }

// Refusal reports a final answer about the request itself (4xx but 429): the events, or
// how they were sent.
func Refusal(status int) bool {
	return status >= 400 && status < 500 && status != http.StatusTooManyRequests
}
