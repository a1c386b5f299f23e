package filter

// Tags returns the tags q tests, each once, in the order they first appear ("tm.event"
// as written, not as "type"). A source can tell from them which members of an event a
// match needs, and match on what it has before it decodes the rest. The empty query
// tests none.
func (q *Query) Tags() []string {
	if q.MatchesAll() {
		return nil
	}
	var tags []string
	q.root.walk(func(c *condition) {
		for _, t := range tags {
			if t == c.tag {
				return
			}
		}
		tags = append(tags, c.tag)
	})
	return tags
}
