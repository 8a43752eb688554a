package sample

import "github.com/sluice-llm/sluice/engine-core/internal/splitmix"

// Uniform returns a number in [0, 1) determined by (seed, pos) alone: the
// random draw of output position pos of a request seeded with seed. The
// host sampler and the runner's device sampler both use it, so a seeded
// request draws the same numbers on every executor.
func Uniform(seed, pos uint64) float64 {
	x := step(seed ^ step(pos+splitmix.Golden))
	return float64(x>>11) * (1.0 / (1 << 53))
}

// step is one splitmix64 output for state x: the finaliser of x advanced
// by the golden increment.
func step(x uint64) uint64 { return splitmix.Mix(x + splitmix.Golden) }
