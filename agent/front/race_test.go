//go:build race

package front

// raceEnabled: under the race detector sync.Pool drops objects at random
// and allocation counts say nothing about a normal build.
const raceEnabled = true
