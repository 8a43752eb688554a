package cpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
)

// swigluEqual reports whether a and b are the same float32 bits, or both
// NaN.
func swigluEqual(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b)
}

// checkSwiGLU runs the AVX2 clamped SwiGLU over the largest multiple of 8
// of g and u and compares every result with the Go loop's, bit for bit
// (NaN for NaN); in place (out = gate) too.
func checkSwiGLU(t *testing.T, name string, g, u []float32, alpha, limit float32) {
	t.Helper()
	n := len(g) &^ 7
	if n == 0 {
		return
	}
	want := make([]float32, n)
	clampedSwiGLUGo(want, g[:n], u[:n], alpha, limit)
	got := make([]float32, n)
	clampedSwiGLUAVX2(&got[0], &g[0], &u[0], n, alpha, limit)
	inPlace := append([]float32(nil), g[:n]...)
	clampedSwiGLUAVX2(&inPlace[0], &inPlace[0], &u[0], n, alpha, limit)
	for i := range want {
		if !swigluEqual(got[i], want[i]) || !swigluEqual(inPlace[i], want[i]) {
			t.Fatalf("%s: alpha %v limit %v, g %v (%#08x) u %v: AVX2 %v (%#08x), in place %v, Go %v (%#08x)",
				name, alpha, limit, g[i], math.Float32bits(g[i]), u[i], got[i], math.Float32bits(got[i]),
				inPlace[i], want[i], math.Float32bits(want[i]))
		}
	}
}

// TestClampedSwiGLUAVX2 checks that the AVX2 clamped SwiGLU
// (swiglu_amd64.s) equals the Go loop bit for bit: random gates and up
// values over several ranges, every value around expf's bounds (where its
// argument −alpha·g crosses 88.376, −87.34 (the 2^(e+126)·2^−126 branch)
// and −103.9) and the clamps, special values (±0, ±Inf, NaN,
// subnormals), gpt-oss's constants and others.
func TestClampedSwiGLUAVX2(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(20, 77))
	consts := []struct{ alpha, limit float32 }{{1.702, 7}, {1, 1e30}, {-1.702, 7}, {0.5, 0}, {3, float32(math.Inf(1))}}
	for _, c := range consts {
		for _, scale := range []float32{0.01, 1, 8, 100, 1e30} {
			g, u := make([]float32, 4096), make([]float32, 4096)
			for i := range g {
				g[i] = float32(r.NormFloat64()) * scale
				u[i] = float32(r.NormFloat64()) * scale
			}
			checkSwiGLU(t, fmt.Sprintf("random×%g", scale), g, u, c.alpha, c.limit)
		}
		// gates whose −alpha·g walks across expf's bounds one ulp at a time
		if c.alpha != 0 {
			for _, x := range []float32{88.3762626647949, -87.336544, -103.9, -87.3, 88, 0} {
				var g []float32
				v := x / -c.alpha
				for range 512 {
					v = math.Nextafter32(v, float32(math.Inf(-1)))
				}
				for range 1024 {
					g = append(g, v)
					v = math.Nextafter32(v, float32(math.Inf(1)))
				}
				checkSwiGLU(t, fmt.Sprintf("around %v", x), g, g, c.alpha, c.limit)
			}
		}
		special := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)),
			float32(math.NaN()), math.Float32frombits(0x7fc12345), math.Float32frombits(0xffa00001),
			math.Float32frombits(1), math.Float32frombits(0x807fffff), math.MaxFloat32, -math.MaxFloat32,
			c.limit, -c.limit, math.Nextafter32(c.limit, 0), 1, -1}
		var g, u []float32
		for _, a := range special {
			for _, b := range special {
				g, u = append(g, a), append(u, b)
			}
		}
		for len(g)%8 != 0 {
			g, u = append(g, 1), append(u, 1)
		}
		checkSwiGLU(t, "special", g, u, c.alpha, c.limit)
	}
}

// TestClampedSwiGLUBackend checks ClampedSwiGLU through the backend for
// every length from 1 to 40 (the AVX2 part and the Go tail) and in place,
// against the Go loop bit for bit, and that it allocates nothing.
func TestClampedSwiGLUBackend(t *testing.T) {
	r := rand.New(rand.NewPCG(20, 78))
	b := New(Options{})
	defer b.Close()
	for cols := 1; cols <= 40; cols++ {
		for _, rows := range []int{1, 3} {
			m := rows * cols
			g, u := randF(r, m), randF(r, m)
			for i := range g {
				g[i] *= 12
				u[i] *= 12
			}
			want := make([]float32, m)
			clampedSwiGLUGo(want, g, u, 1.702, 7)
			out := &kernels.Host{R: rows, C: cols, F: make([]float32, m)}
			gh, uh := &kernels.Host{R: rows, C: cols, F: append([]float32(nil), g...)}, &kernels.Host{R: rows, C: cols, F: u}
			b.ClampedSwiGLU(out, gh, uh, rows, 1.702, 7)
			b.ClampedSwiGLU(gh, gh, uh, rows, 1.702, 7)
			for i := range want {
				if !swigluEqual(out.F[i], want[i]) || !swigluEqual(gh.F[i], want[i]) {
					t.Fatalf("%d×%d [%d]: %v, in place %v, Go %v", rows, cols, i, out.F[i], gh.F[i], want[i])
				}
			}
			if a := testing.AllocsPerRun(10, func() { b.ClampedSwiGLU(out, gh, uh, rows, 1.702, 7) }); a != 0 {
				t.Fatalf("%d×%d: %v allocations", rows, cols, a)
			}
		}
	}
}

// FuzzClampedSwiGLU feeds the AVX2 clamped SwiGLU gates, up values and
// constants from the fuzzer's bytes (8 bytes per value pair, any bits)
// and compares it with the Go loop bit for bit.
func FuzzClampedSwiGLU(f *testing.F) {
	if !hasAVX2 {
		f.Skip("no AVX2 kernels on this machine or build")
	}
	seed := make([]byte, 64)
	for i := range seed {
		seed[i] = byte(i * 37)
	}
	f.Add(seed, float32(1.702), float32(7))
	f.Add(make([]byte, 64), float32(1), float32(0))
	f.Fuzz(func(t *testing.T, data []byte, alpha, limit float32) {
		n := len(data) / 8
		if n > 4096 {
			n = 4096
		}
		g, u := make([]float32, n), make([]float32, n)
		for i := range n {
			g[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[8*i:]))
			u[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[8*i+4:]))
		}
		checkSwiGLU(t, "fuzz", g, u, alpha, limit)
	})
}

// BenchmarkClampedSwiGLU measures ClampedSwiGLU on 64 rows of 2880 (a
// 16-sequence gpt-oss-20b step's routed rows, one layer): the AVX2 loop
// and the Go loop it replaces, CPU-ns per value.
func BenchmarkClampedSwiGLU(b *testing.B) {
	r := rand.New(rand.NewPCG(20, 79))
	const m = 64 * 2880
	g, u := randF(r, m), randF(r, m)
	for i := range g {
		g[i] *= 8
		u[i] *= 8
	}
	o := make([]float32, m)
	for _, v := range []string{"avx2", "go"} {
		if v == "avx2" && !hasAVX2 {
			continue
		}
		b.Run(v, func(b *testing.B) {
			c0 := processCPU()
			for b.Loop() {
				if v == "avx2" {
					clampedSwiGLUAVX2(&o[0], &g[0], &u[0], m, 1.702, 7)
				} else {
					clampedSwiGLUGo(o, g, u, 1.702, 7)
				}
			}
			b.ReportMetric(float64((processCPU()-c0).Nanoseconds())/float64(b.N*m), "cpu-ns/value")
		})
	}
}
