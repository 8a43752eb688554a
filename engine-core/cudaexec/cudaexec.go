// Package cudaexec is engine-core's hook for `--executor cuda`: it loads the
// model onto the CUDA backend (kernels/cuda) and returns a runner that owns
// that backend. Weights are uploaded once; every op of a step runs on the
// backend's one stream. The runner samples on the device through the
// backend's kernels.DeviceSampler, so a step copies back only the sampled
// ids and logprobs (rows whose parameters need the host sampler — logprobs,
// penalties, logits processors, min_p — still copy their logits rows).
//
// In binaries built without -tags cuda, New returns an error wrapping
// cuda.ErrNotCompiled, which says how to build the CUDA variant
// (bin/engine-core-cuda); such binaries never link the CUDA libraries.
package cudaexec

import (
	"fmt"

	"github.com/sluice-llm/sluice/engine-core/runner"
	"github.com/sluice-llm/sluice/kernels"
	"github.com/sluice-llm/sluice/kernels/cuda"
)

// Runner is a runner.Runner whose model lives on a CUDA device; it
// satisfies sched.Executor through the embedded runner.
type Runner struct {
	*runner.Runner
	be kernels.Backend
}

// New opens the CUDA device of opts and loads cfg.Model onto it (cfg.Backend
// is ignored: the CUDA backend replaces it).
func New(cfg runner.Config, opts cuda.Options) (*Runner, error) {
	be, err := cuda.New(opts)
	if err != nil {
		return nil, fmt.Errorf("cuda executor: %w", err)
	}
	cfg.Backend = be
	r, err := runner.New(cfg)
	if err != nil {
		be.Close()
		return nil, fmt.Errorf("cuda executor: %w", err)
	}
	return &Runner{Runner: r, be: be}, nil
}

// Backend returns the CUDA backend the model lives on.
func (r *Runner) Backend() kernels.Backend { return r.be }

// Close releases the model and then the device.
func (r *Runner) Close() error {
	err := r.Runner.Close()
	if r.be != nil {
		r.be.Close()
		r.be = nil
	}
	return err
}
