package filter

import "strings"

// MatchAttributes reports whether an event given by its flattened attributes matches, the
// way a Tendermint or CometBFT node matches a subscription: attrs maps each "type.key" of the
// event's ABCI events to its values in order, with the node's own tags beside them
// (tm.event, tx.hash, tx.height, block.height). A condition holds when any value of its tag
// satisfies it, so conditions joined by AND may be met by different ABCI events of one
// transaction — as a subscription matches, and unlike the indexer's tx_search, which needs
// them all within one ABCI event. A tag that names an event type by itself ("app" beside
// "app.key") has the value "", as on a node, so `app EXISTS` holds. An event with no
// attributes matches no query but the empty one. Values are read as the node reads them:
// a number as its leading digits ("8.5stake" is 8.5), a time as RFC 3339.
func (q *Query) MatchAttributes(attrs map[string][]string) bool {
	if q.MatchesAll() {
		return true
	}
	if len(attrs) == 0 {
		return false
	}
	return q.root.matchAttrs(attrs)
}

func (e *expr) matchAttrs(attrs map[string][]string) bool {
	switch e.kind {
	case exprAnd:
		for _, x := range e.terms {
			if !x.matchAttrs(attrs) {
				return false
			}
		}
		return true
	case exprOr:
		for _, x := range e.terms {
			if x.matchAttrs(attrs) {
				return true
			}
		}
		return false
	case exprNot:
		return !e.terms[0].matchAttrs(attrs)
	}
	return e.cond.matchAttrs(attrs)
}

// matchAttrs tests the values of c's tag, and "" when the tag is an event type.
func (c *condition) matchAttrs(attrs map[string][]string) bool {
	for _, v := range attrs[c.tag] {
		if c.op == tokExists || c.test(v, 0, false) {
			return true
		}
	}
	return isEventType(attrs, c.tag) && (c.op == tokExists || c.test("", 0, false))
}

// isEventType reports whether tag is the type of one of the attributes: what comes before
// the last dot of a key.
func isEventType(attrs map[string][]string, tag string) bool {
	for k := range attrs {
		if len(k) > len(tag) && k[len(tag)] == '.' && strings.HasPrefix(k, tag) && strings.IndexByte(k[len(tag)+1:], '.') < 0 {
			return true
		}
	}
	return false
}
