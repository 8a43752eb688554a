//go:build unix

package cpu

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time (user + system) this process has used:
// on a loaded, shared machine, work per CPU-second is a steadier measure
// than work per wall-clock second.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
