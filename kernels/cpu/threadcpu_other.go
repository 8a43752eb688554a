//go:build !linux

package cpu

// threadCPU returns 0: OpStats' thread CPU times are recorded on Linux
// only.
func threadCPU() int64 { return 0 }
