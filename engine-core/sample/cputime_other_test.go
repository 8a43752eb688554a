//go:build !unix

package sample

// cpuNow is unavailable here; benchmarks then report no CPU time.
func cpuNow() int64 { return 0 }
