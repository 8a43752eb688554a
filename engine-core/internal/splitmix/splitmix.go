// Package splitmix holds the splitmix64 mixing function that engine-core's
// hashes and seeded random draws are built on (prefix-cache block hashes,
// per-request seeds, the host sampler's uniform draws, the simulated
// accelerator's scripted choices).
package splitmix

// Golden is splitmix64's increment, 2^64 divided by the golden ratio.
const Golden = 0x9e3779b97f4a7c15

// Mix is the splitmix64 finaliser: a bijection on uint64 whose output bits
// each depend on every input bit.
func Mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
