//go:build !race

package kafka

// poisonReleased clears released item memory in race-detector builds, so that a use after
// Page.Release reads zeros in the tests rather than whatever the next page wrote.
const poisonReleased = false
