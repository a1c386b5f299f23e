//go:build race

package kafka

const poisonReleased = true
