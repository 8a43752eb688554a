//go:build unix

package model

import "syscall"

// processCPUSeconds returns the CPU time (user + system) this process has
// used: on a loaded, shared machine work per CPU-second is steadier than
// work per wall-clock second.
func processCPUSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
