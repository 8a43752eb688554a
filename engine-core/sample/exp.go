package sample

import "math"

// expTable[b] = exp(-b/4) for the quarter-nat steps 0..255.
var expTable = func() (t [expSteps]float32) {
	for i := range t {
		t[i] = float32(math.Exp(-float64(i) / 4))
	}
	return t
}()

const expSteps = 256

// expNeg returns exp(-d) for d ≥ 0 (relative error below 1e-6; 0 beyond
// d = 64): a table step of a quarter nat times a short polynomial for the
// rest. Small enough to inline into the hot loops.
func expNeg(d float32) float32 {
	t := d * 4
	if !(t < expSteps-1) { // also catches NaN and +inf
		return 0
	}
	b := int(t)
	f := (float32(b) - t) * 0.25 // in (-0.25, 0]
	return expTable[b&(expSteps-1)] * (1 + f*(1+f*(0.5+f*(1.0/6+f*(1.0/24+f*(1.0/120))))))
}
