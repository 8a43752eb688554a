package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
)

// TestAddRMSNorm checks that AddRMSNorm equals Add followed by RMSNorm bit
// for bit on this backend, that both equal rmsScale's one-chunk definition
// bit for bit (normTask runs four chunks at a time: rmsScale4), and within a tolerance of the reference
// backend's AddRMSNorm, for 1–97 rows, whole-row and per-head chunks,
// chunk lengths with and without a tail past the last 16 values, out
// aliasing the residual input or not, on 1 and 2 threads (serial and pooled
// sizes alike), with the AVX-512 kernel (scaleMulAVX512) and without
// (Options.Plain).
func TestAddRMSNorm(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 4))
	for _, plain := range []bool{false, true} {
		for _, threads := range []int{1, 2} {
			for _, c := range []struct{ cols, chunk int }{{2048, 2048}, {64, 64}, {96, 32}, {4096, 128}, {24, 24}, {200, 40}} {
				for _, rows := range []int{1, 2, 3, 4, 5, 7, 15, 16, 17, 33, 64, 97} {
					for _, alias := range []bool{false, true} {
						name := fmt.Sprintf("plain=%v/threads=%d/cols=%d/chunk=%d/rows=%d/alias=%v", plain, threads, c.cols, c.chunk, rows, alias)
						t.Run(name, func(t *testing.T) {
							checkAddRMSNorm(t, r, Options{Threads: threads, Plain: plain}, rows, c.cols, c.chunk, alias)
						})
					}
				}
			}
		}
	}
}

// checkAddRMSNorm runs one TestAddRMSNorm case on a backend made with o.
func checkAddRMSNorm(t *testing.T, r *rand.Rand, o Options, rows, cols, chunk int, alias bool) {
	t.Helper()
	be := New(o)
	defer be.Close()
	x0, r0, w0 := randF(r, rows*cols), randF(r, rows*cols), randF(r, chunk)
	if rows > 2 {
		// a large and a tiny row: the norm's scale far from 1 both ways
		for j := 0; j < cols; j++ {
			x0[j] *= 1e4
			x0[cols+j] *= 1e-4
			r0[cols+j] *= 1e-4
		}
	}
	mk := func(src []float32) *kernels.Host {
		return &kernels.Host{R: rows, C: len(src) / rows, F: append([]float32(nil), src...)}
	}
	w := &kernels.Host{R: 1, C: chunk, F: w0}

	// the two ops
	wantX, wantOut, res := mk(x0), mk(r0), mk(r0)
	be.Add(wantX, wantX, res, rows)
	be.RMSNorm(wantOut, wantX, w, rows, 1e-5)

	// fused, out = r or a separate tensor
	gotX, gotR := mk(x0), mk(r0)
	gotOut := gotR
	if !alias {
		gotOut = mk(make([]float32, rows*cols))
	}
	be.AddRMSNorm(gotOut, gotX, gotR, w, rows, 1e-5)

	// the reference backend's Add and RMSNorm (its own order of the
	// squares' sum: a tolerance)
	refX, refOut := mk(x0), mk(r0)
	var ref kernels.Ref
	ref.AddRMSNorm(refOut, refX, refOut, w, rows, 1e-5)

	// the one-chunk definition (rmsScale), chunk by chunk
	defX, defOut := append([]float32(nil), x0...), make([]float32, rows*cols)
	for i := range defX {
		defX[i] += r0[i]
	}
	for i := 0; i < rows*cols; i += chunk {
		inv := rmsScale(defX[i:i+chunk], 1e-5)
		for j, v := range defX[i : i+chunk] {
			defOut[i+j] = (v * inv) * w0[j]
		}
	}

	for i := range wantX.F {
		if math.Float32bits(gotOut.F[i]) != math.Float32bits(defOut[i]) || math.Float32bits(wantOut.F[i]) != math.Float32bits(defOut[i]) {
			t.Fatalf("out[%d]: AddRMSNorm %v, RMSNorm %v, one chunk at a time %v", i, gotOut.F[i], wantOut.F[i], defOut[i])
		}
		if math.Float32bits(gotX.F[i]) != math.Float32bits(wantX.F[i]) {
			t.Fatalf("x[%d] = %v, Add gives %v", i, gotX.F[i], wantX.F[i])
		}
		if math.Float32bits(gotOut.F[i]) != math.Float32bits(wantOut.F[i]) {
			t.Fatalf("out[%d] = %v, RMSNorm gives %v", i, gotOut.F[i], wantOut.F[i])
		}
		if refX.F[i] != wantX.F[i] || !close32(gotOut.F[i], refOut.F[i], 1e-5) {
			t.Fatalf("[%d]: x %v out %v, reference x %v out %v", i, gotX.F[i], gotOut.F[i], refX.F[i], refOut.F[i])
		}
	}
	if !alias {
		for i := range gotR.F {
			if gotR.F[i] != r0[i] {
				t.Fatalf("r[%d] written: %v, was %v", i, gotR.F[i], r0[i])
			}
		}
	}
}

// TestAddRMSNormAllocs checks that the pooled AddRMSNorm, RMSNorm and RoPE
// of 16 rows allocate nothing.
func TestAddRMSNormAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 5))
	be := New(Options{Threads: 2})
	defer be.Close()
	const rows, cols, hd = 16, 2048, 64
	x := &kernels.Host{R: rows, C: cols, F: randF(r, rows*cols)}
	res := &kernels.Host{R: rows, C: cols, F: randF(r, rows*cols)}
	w := &kernels.Host{R: 1, C: cols, F: randF(r, cols)}
	inv := make([]float64, hd/2)
	for j := range inv {
		inv[j] = math.Pow(10000, -2*float64(j)/hd)
	}
	tab, _ := be.WeightF32(256, hd, kernels.RoPETable(256, inv))
	pos := make([]int32, rows)
	for i := range pos {
		pos[i] = int32(100 + i)
	}
	for name, f := range map[string]func(){
		"AddRMSNorm": func() { be.AddRMSNorm(res, x, res, w, rows, 1e-5) },
		"RMSNorm":    func() { be.RMSNorm(res, x, w, rows, 1e-5) },
		"RoPE":       func() { be.RoPE(x, pos, tab, hd, kernels.RoPEHalf) },
	} {
		if a := testing.AllocsPerRun(20, f); a != 0 {
			t.Errorf("%s: %v allocations per call", name, a)
		}
	}
}

// BenchmarkAddRMSNorm1B measures a residual addition and the RMSNorm after
// it for the 1B shape (rows of 2048) at 1 and 16 rows, in process CPU per
// call (the workers' spinning included): "fused" is AddRMSNorm, "separate"
// Add then RMSNorm (before AddRMSNorm, both ran on the calling thread at 16
// rows while the worker spun).
func BenchmarkAddRMSNorm1B(b *testing.B) {
	const cols = 2048
	for _, rows := range []int{1, 16} {
		for _, fused := range []bool{true, false} {
			name := fmt.Sprintf("rows=%d/separate", rows)
			if fused {
				name = fmt.Sprintf("rows=%d/fused", rows)
			}
			b.Run(name, func(b *testing.B) {
				r := rand.New(rand.NewPCG(17, 6))
				be := New(Options{})
				defer be.Close()
				x := &kernels.Host{R: rows, C: cols, F: randF(r, rows*cols)}
				res := &kernels.Host{R: rows, C: cols, F: randF(r, rows*cols)}
				out := &kernels.Host{R: rows, C: cols, F: make([]float32, rows*cols)}
				w := &kernels.Host{R: 1, C: cols, F: randF(r, cols)}
				b.ResetTimer()
				c0 := processCPU()
				for i := 0; i < b.N; i++ {
					if fused {
						be.AddRMSNorm(out, x, res, w, rows, 1e-5)
					} else {
						be.Add(x, x, res, rows)
						be.RMSNorm(out, x, w, rows, 1e-5)
					}
				}
				b.ReportMetric(float64((processCPU()-c0).Nanoseconds())/1e3/float64(b.N), "cpu-µs/op")
			})
		}
	}
}
