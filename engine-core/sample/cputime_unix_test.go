//go:build unix

package sample

import "syscall"

// cpuNow returns the CPU time (user + system) the process has used, in
// nanoseconds. Benchmarks report it next to wall time because the shared
// benchmark machine is often oversubscribed.
func cpuNow() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
