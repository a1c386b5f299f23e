// Package english words counts in messages: "1 event", "2 events", "1 was", "2 were".
package english

import "strconv"

// Plural returns n and the noun, in the plural unless n is 1: "1 event", "0 events". Nouns
// whose plural is not noun+"s" (entry, batch) are spelt out.
func Plural(n int, noun string) string {
	s := strconv.Itoa(n) + " "
	if n == 1 {
		return s + noun
	}
	return s + pluralOf(noun)
}

func pluralOf(noun string) string {
	switch {
	case noun == "":
		return ""
	case len(noun) > 1 && noun[len(noun)-1] == 'y' && !isVowel(noun[len(noun)-2]):
		return noun[:len(noun)-1] + "ies" // entry, entries
	case hasSuffix(noun, "s", "x", "ch", "sh"):
		return noun + "es" // batch, batches
	}
	return noun + "s"
}

func isVowel(b byte) bool {
	switch b {
	case 'a', 'e', 'i', 'o', 'u':
		return true
	}
	return false
}

func hasSuffix(s string, suffixes ...string) bool {
	for _, x := range suffixes {
		if len(s) >= len(x) && s[len(s)-len(x):] == x {
			return true
		}
	}
	return false
}

// WasWere returns "1 event was", "2 events were"; with no noun, "1 was", "2 were".
func WasWere(n int, noun string) string {
	s := strconv.Itoa(n)
	if noun != "" {
		s = Plural(n, noun)
	}
	if n == 1 {
		return s + " was"
	}
	return s + " were"
}
