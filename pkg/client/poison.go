//go:build !race

package client

// poisonReleased: see poison_race.go.
const poisonReleased = false
