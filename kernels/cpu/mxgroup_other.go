//go:build !amd64 || purego

package cpu

// The group tiles are AVX2 only: mxfp4Tiles takes them only when the
// kernels have AVX2, so these are never called.

func dotMXG1AVX2(p *mxgArgs) { panic("unreachable") }
func dotMXG2AVX2(p *mxgArgs) { panic("unreachable") }
func dotMXG3AVX2(p *mxgArgs) { panic("unreachable") }
func dotMXG4AVX2(p *mxgArgs) { panic("unreachable") }
func dotMXG5AVX2(p *mxgArgs) { panic("unreachable") }
func dotMXG6AVX2(p *mxgArgs) { panic("unreachable") }
func dotMXG7AVX2(p *mxgArgs) { panic("unreachable") }
func dotMXG8AVX2(p *mxgArgs) { panic("unreachable") }
