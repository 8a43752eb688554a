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
			for _, guided := range []bool{false, true} {
				var c countTask
				p.run(total, 4, 0, guided, &c)
				if got := c.units.Load(); got != int64(total) {
					t.Errorf("threads=%d total=%d guided=%v: %d units run", threads, total, guided, got)
				}
			}
		}
		p.close()
	}
}

// TestPoolCut checks the chunk bounds: they cover [0, total) in order, are
// multiples of align (but the last), about four equal chunks per thread
// for parallel, and for parallelGuided sizes that never grow (but the
// remainder at the end), start at half an even share and end small, at
// most 16 chunks per thread.
func TestPoolCut(t *testing.T) {
	cases := []struct {
		threads, total, align int
		guided                bool
		first, last, chunks   int // first chunk, most units in the last, chunks; 0: not checked
	}{
		{2, 2048, 4, false, 256, 256, 8},
		{2, 32000, 4, false, 4000, 4000, 8},
		{2, 2048, 4, true, 512, 64, 0},
		{2, 3072, 4, true, 768, 0, 0},
		{2, 32000, 4, true, 8000, 0, 0},
		{2, 8192, 4, true, 2048, 256, 0},
		{3, 1000, 4, true, 168, 0, 0},
		{2, 9, 4, true, 4, 1, 3},
		{2, 5, 1, false, 1, 1, 5},
		{16, 100000, 16, true, 3136, 0, 0},
	}
	for _, c := range cases {
		p := &pool{n: c.threads, bounds: make([]int, 16*c.threads+2)}
		n := p.cut(c.total, c.align, c.guided)
		b := p.bounds[:n+1]
		if b[0] != 0 || b[n] != c.total || n > 16*c.threads || (c.chunks > 0 && n != c.chunks) {
			t.Errorf("%+v: %d chunks, bounds %v", c, n, b)
			continue
		}
		for i := 0; i < n; i++ {
			size := b[i+1] - b[i]
			if size <= 0 || (i < n-1 && b[i+1]%c.align != 0) {
				t.Errorf("%+v: chunk %d is [%d, %d)", c, i, b[i], b[i+1])
			}
			if c.guided && i > 0 && i < n-1 && size > b[i]-b[i-1] {
				t.Errorf("%+v: chunk %d (%d units) larger than chunk %d", c, i, size, i-1)
			}
		}
		if c.first > 0 && b[1]-b[0] != c.first {
			t.Errorf("%+v: first chunk %d units, want %d", c, b[1]-b[0], c.first)
		}
		if c.last > 0 && b[n]-b[n-1] > c.last {
			t.Errorf("%+v: last chunk %d units, want ≤ %d", c, b[n]-b[n-1], c.last)
		}
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
