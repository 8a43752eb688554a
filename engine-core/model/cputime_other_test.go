//go:build !unix

package model

// processCPUSeconds is 0 where getrusage is missing: no per-CPU figure.
func processCPUSeconds() float64 { return 0 }
