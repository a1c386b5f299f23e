package lint

import "strings"

// isPastTense guesses whether action, the action word of an event type, is
// in the past tense, as OEP-41 asks. The heuristic: the last
// underscore-separated word ends in "ed" (created, enrollment_changed) or
// is a common irregular past participle, possibly after a prefix such as
// re- or un- (sent, rewritten, unset). It is a guess: it misses irregular
// forms not in the list, and takes present-tense words ending in "ed"
// (need, proceed) for past tense. That is why a miss is only a warning.
func isPastTense(action string) bool {
	w := action
	if i := strings.LastIndexByte(w, '_'); i >= 0 {
		w = w[i+1:]
	}
	if len(w) > 2 && strings.HasSuffix(w, "ed") {
		return true
	}
	if irregularPast[w] {
		return true
	}
	for _, p := range pastPrefixes {
		if rest, ok := strings.CutPrefix(w, p); ok && irregularPast[rest] {
			return true
		}
	}
	return false
}

// pastPrefixes are prefixes that keep a verb's past tense (re+sent, un+done).
var pastPrefixes = []string{"re", "un", "pre", "over", "under", "mis", "out", "with"}

// irregularPast lists irregular past participles likely in event types.
// Some (run, set, put, cut, read) are also present-tense forms; they are
// accepted because the past reading is the likely one in an event name.
var irregularPast = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`
		begun bought brought built caught chosen come cut dealt done drawn driven
		eaten fallen felt forgotten found frozen given gone got gotten grown held
		hidden hit hung kept known laid led left lent let lost made meant met
		paid put quit read ridden run said seen sent set shown shut sold spent
		split spoken spread stolen struck stuck taken taught thought told
		thrown undone understood withdrawn woken won written`) {
		m[w] = true
	}
	return m
}()
