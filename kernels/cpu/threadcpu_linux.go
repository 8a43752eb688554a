package cpu

import "golang.org/x/sys/unix"

// threadCPU returns the CPU time the calling OS thread has used, in
// nanoseconds (0 if the clock cannot be read).
func threadCPU() int64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return ts.Nano()
}

// gettid returns the calling OS thread's id (OpStats' serial gaps count
// only while the caller stays on one thread).
func gettid() int { return unix.Gettid() }
