//go:build race

package rawsock

// raceEnabled: built with the race detector. The raw system calls carry
// none of the syscall package's race annotations (a write releases, a
// read acquires), so the detector would see no order between what one
// process did before writing to a socket and what another goroutine does
// after reading it (a test's client and server), and report races that
// are not there. Under it, reads and writes go through syscall.Read and
// syscall.Write, which carry the annotations.
const raceEnabled = true
