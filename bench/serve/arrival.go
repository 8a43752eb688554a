package serve

import (
	"math"
	"math/rand/v2"
)

// ArrivalTimes returns when each of n requests is sent, in seconds from the
// start, as vLLM's get_request does: all at 0 for an infinite rate, else
// cumulative gaps drawn from Gamma(shape=burstiness, scale=1/(rate·burstiness))
// (exponential, i.e. Poisson arrivals, for burstiness 1), rescaled so the
// last request goes out at exactly n/rate.
func ArrivalTimes(n int, rate, burstiness float64, rng *rand.Rand) []float64 {
	times := make([]float64, n)
	if n == 0 || math.IsInf(rate, 1) {
		return times
	}
	total := 0.0
	for i := range times {
		gap := 1 / rate
		if !math.IsInf(burstiness, 1) {
			gap = Gamma(burstiness, 1/(rate*burstiness), rng)
		}
		total += gap
		times[i] = total
	}
	if total > 0 {
		scale := float64(n) / rate / total
		for i := range times {
			times[i] *= scale
		}
	}
	return times
}

// Gamma draws from the gamma distribution with the given shape and scale
// (Marsaglia and Tsang's method; shape < 1 by boosting to shape+1).
func Gamma(shape, scale float64, rng *rand.Rand) float64 {
	if shape < 1 {
		u := rng.Float64()
		for u == 0 {
			u = rng.Float64()
		}
		return Gamma(shape+1, scale, rng) * math.Pow(u, 1/shape)
	}
	d := shape - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := rng.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := rng.Float64()
		if u < 1-0.0331*x*x*x*x || math.Log(u) < 0.5*x*x+d*(1-v+math.Log(v)) {
			return d * v * scale
		}
	}
}
