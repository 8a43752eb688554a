package cpu

import (
	"testing"

	"github.com/sluice-llm/sluice/kernels"
)

// TestAllocKV checks AllocKV's tensors, from the huge-page arena and from
// the Go heap (Options.HeapKV): the asked size and type, zeroed, writable
// to the last element, and each one apart from the others.
func TestAllocKV(t *testing.T) {
	for _, c := range []struct {
		name       string
		f16, heap  bool
		rows, cols int
	}{
		{"f16", true, false, 4096, 512},
		{"f16-heap", true, true, 4096, 512},
		{"f32", false, false, 1000, 96},
		{"f32-heap", false, true, 1000, 96},
		{"f16-small", true, false, 3, 5},
	} {
		t.Run(c.name, func(t *testing.T) {
			be := New(Options{KVF16: c.f16, HeapKV: c.heap, Threads: 1})
			defer be.Close()
			var hs []*kernels.Host
			for range 3 {
				h := be.AllocKV(c.rows, c.cols).(*kernels.Host)
				if h.R != c.rows || h.C != c.cols {
					t.Fatalf("shape %d×%d, want %d×%d", h.R, h.C, c.rows, c.cols)
				}
				n := len(h.F)
				if c.f16 {
					n = len(h.H)
					if h.DT != kernels.F16 {
						t.Fatalf("type %v, want F16", h.DT)
					}
				}
				if n != c.rows*c.cols {
					t.Fatalf("%d elements, want %d", n, c.rows*c.cols)
				}
				for i := 0; i < n; i++ {
					if c.f16 && h.H[i] != 0 || !c.f16 && h.F[i] != 0 {
						t.Fatalf("element %d not zero", i)
					}
				}
				hs = append(hs, h)
			}
			for i, h := range hs {
				if c.f16 {
					for j := range h.H {
						h.H[j] = uint16(i + 1)
					}
				} else {
					for j := range h.F {
						h.F[j] = float32(i + 1)
					}
				}
			}
			for i, h := range hs {
				if c.f16 && (h.H[0] != uint16(i+1) || h.H[len(h.H)-1] != uint16(i+1)) || !c.f16 && (h.F[0] != float32(i+1) || h.F[len(h.F)-1] != float32(i+1)) {
					t.Fatalf("tensor %d overlaps another", i)
				}
			}
		})
	}
}
