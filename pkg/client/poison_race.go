//go:build race

package client

// poisonReleased makes release wipe a reply buffer, so that a use after release reads zeros,
// not old data: on in builds with the race detector (the tests), off in the binary.
const poisonReleased = true
