package sample

// uniform returns a number in [0, 1) determined by (seed, pos) alone.
func uniform(seed, pos uint64) float64 {
	x := splitmix(seed ^ splitmix(pos+0x9e3779b97f4a7c15))
	return float64(x>>11) * (1.0 / (1 << 53))
}

// splitmix is the splitmix64 finaliser.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
