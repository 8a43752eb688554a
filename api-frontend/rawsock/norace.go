//go:build !race

package rawsock

// raceEnabled: see race.go.
const raceEnabled = false
