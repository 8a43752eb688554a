package cpu

import (
	"sync/atomic"
	"testing"
)

// countTask counts the units it was given.
type countTask struct{ units atomic.Int64 }

func (c *countTask) run(lo, hi, _ int) { c.units.Add(int64(hi - lo)) }

// TestPoolCovers checks that parallel hands out every unit exactly once,
// for totals around the chunking boundaries.
func TestPoolCovers(t *testing.T) {
	for _, threads := range []int{1, 2, 3} {
		p := newPool(threads)
		for _, total := range []int{1, 3, 4, 5, 31, 512, 2048, 32000} {
			var c countTask
			p.parallel(total, 4, 0, &c)
			if got := c.units.Load(); got != int64(total) {
				t.Errorf("threads=%d total=%d: %d units run", threads, total, got)
			}
		}
		p.close()
	}
}

// BenchmarkPoolDispatch times one parallel op whose chunks do nothing:
// the per-MatMul cost of handing work to the second thread and joining
// it (a decode step of the 1B shape issues 113 MatMuls).
func BenchmarkPoolDispatch(b *testing.B) {
	p := newPool(2)
	defer p.close()
	var c countTask
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p.parallel(2048, 4, 0, &c)
	}
}
