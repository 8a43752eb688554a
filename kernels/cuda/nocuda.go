//go:build !cuda

package cuda

import "github.com/sluice-llm/sluice/kernels"

// Compiled reports whether this binary has the CUDA backend (built with
// -tags cuda).
const Compiled = false

// New returns ErrNotCompiled: this binary was built without -tags cuda.
func New(opts Options) (kernels.Backend, error) {
	return nil, ErrNotCompiled
}
