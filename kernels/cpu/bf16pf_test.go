package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
)

// TestHalfPanelBF16Pf checks the BF16 one-panel kernels with the in-row
// prefetch against halfPanelWidenAVX2 (no prefetch), which
// TestHalfPanelKernels checks against plain Go: the same sums bit for bit
// for every width, for chunks of K short and long, with the rows at the
// very end of their buffer (the prefetches then reach past it, which
// must not fault) and with rows far apart.
func TestHalfPanelBF16Pf(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(23, 5))
	cases := []struct {
		k, ws int // values of K, weight row stride in values
	}{
		{8, 8}, {16, 24}, {24, 24}, {40, 264}, {256, 256}, {256, 2880}, {2880, 2880},
	}
	for _, c := range cases {
		for W := 1; W <= halfPanelMaxW; W++ {
			t.Run(fmt.Sprintf("k%d/ws%d/W%d", c.k, c.ws, W), func(t *testing.T) {
				// the last row's k values end the buffer
				data := randBlocks(r, kernels.BF16, W, c.ws)
				sanitizeHalves(kernels.BF16, data)
				data = data[:2*((W-1)*c.ws+c.k)]
				xp := randF(r, 16*c.k)
				acc0 := randF(r, 16*W)
				want := append([]float32(nil), acc0...)
				got := append([]float32(nil), acc0...)
				var buf [8 * halfPanelMaxW]float32
				halfPanelWidenAVX2(true, W, &xp[0], &data[0], 2*c.ws, c.k, &want[0], &buf[0])
				halfPanelBF16PfAVX2(W, &xp[0], &data[0], 2*c.ws, c.k, &got[0], &buf[0])
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("acc[%d] = %v with the prefetch, %v without", i, got[i], want[i])
					}
				}
			})
		}
	}
}
