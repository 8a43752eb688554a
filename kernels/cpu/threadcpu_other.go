//go:build !linux

package cpu

// threadCPU returns 0: OpStats' thread CPU times are recorded on Linux
// only.
func threadCPU() int64 { return 0 }

// gettid returns 1: without a thread CPU clock every gap counts, at zero
// CPU.
func gettid() int { return 1 }
