package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestYaRNAgainstPython compares YaRN.InvFreq with transformers'
// _compute_yarn_parameters transcribed in Python (stdlib math only), for
// gpt-oss's configuration and a truncating one.
func TestYaRNAgainstPython(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("SKIP: python3 not found; TestYaRNGptOss still checks gpt-oss's values")
	}
	const script = `
import math, sys
head_dim, base, factor, orig, beta_fast, beta_slow, truncate = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6]), sys.argv[7] == "1"
def get_mscale(scale, mscale=1):
    if scale <= 1: return 1.0
    return 0.1 * mscale * math.log(scale) + 1.0
def find_correction_dim(num_rotations, dim, base, mpe):
    return (dim * math.log(mpe / (num_rotations * 2 * math.pi))) / (2 * math.log(base))
def find_correction_range(low_rot, high_rot, dim, base, mpe, truncate):
    low = find_correction_dim(low_rot, dim, base, mpe)
    high = find_correction_dim(high_rot, dim, base, mpe)
    if truncate:
        low = math.floor(low); high = math.ceil(high)
    return max(low, 0), min(high, dim - 1)
dim = head_dim
low, high = find_correction_range(beta_fast, beta_slow, dim, base, orig, truncate)
if low == high: high += 0.001
out = []
for j in range(dim // 2):
    pos_freq = base ** ((2 * j) / dim)
    ramp = min(max((j - low) / (high - low), 0.0), 1.0)
    extra_factor = 1 - ramp
    out.append((1 / (factor * pos_freq)) * (1 - extra_factor) + (1 / pos_freq) * extra_factor)
print(repr(get_mscale(factor)))
print(" ".join(repr(x) for x in out))
`
	for _, tc := range []struct {
		y       YaRN
		headDim int
		base    float64
	}{
		{YaRN{Factor: 32, OriginalMaxPos: 4096, BetaFast: 32, BetaSlow: 1, Truncate: false}, 64, 150000},
		{YaRN{Factor: 4, OriginalMaxPos: 32768, Truncate: true}, 128, 1000000},
	} {
		t.Run(fmt.Sprintf("factor%v_trunc%v", tc.y.Factor, tc.y.Truncate), func(t *testing.T) {
			bf, bs := tc.y.BetaFast, tc.y.BetaSlow
			if bf == 0 {
				bf, bs = 32, 1
			}
			tr := "0"
			if tc.y.Truncate {
				tr = "1"
			}
			out, err := exec.Command(py, "-c", script, strconv.Itoa(tc.headDim), fmt.Sprint(tc.base), fmt.Sprint(tc.y.Factor),
				strconv.Itoa(tc.y.OriginalMaxPos), fmt.Sprint(bf), fmt.Sprint(bs), tr).CombinedOutput()
			if err != nil {
				t.Fatalf("python: %v\n%s", err, out)
			}
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			wantAF, _ := strconv.ParseFloat(lines[0], 64)
			inv, af := tc.y.InvFreq(tc.headDim, tc.base)
			if math.Abs(af-wantAF) > 1e-15 {
				t.Errorf("attention factor %v, want %v", af, wantAF)
			}
			fields := strings.Fields(lines[1])
			if len(fields) != len(inv) {
				t.Fatalf("%d frequencies, Python %d", len(inv), len(fields))
			}
			for j, f := range fields {
				want, _ := strconv.ParseFloat(f, 64)
				if math.Abs(inv[j]-want) > 1e-15*math.Abs(want) {
					t.Errorf("inv[%d] = %v, want %v", j, inv[j], want)
				}
			}
		})
	}
}

// TestYaRNGptOss checks the ends of gpt-oss's frequency table: high
// frequencies extrapolate (base^(-2j/d)), low ones interpolate (÷32), and
// the concentration is 0.1·ln 32 + 1.
func TestYaRNGptOss(t *testing.T) {
	inv, af := YaRN{Factor: 32, OriginalMaxPos: 4096, BetaFast: 32, BetaSlow: 1}.InvFreq(64, 150000)
	if want := 0.1*math.Log(32) + 1; af != want {
		t.Errorf("concentration %v, want %v", af, want)
	}
	if inv[0] != 1 || math.Abs(inv[2]-math.Pow(150000, -4.0/64)) > 1e-18 {
		t.Errorf("extrapolated end %v %v", inv[0], inv[2])
	}
	if want := math.Pow(150000, -62.0/64) / 32; math.Abs(inv[31]-want) > 1e-18 {
		t.Errorf("interpolated end %v, want %v", inv[31], want)
	}
}

// naiveSinkAttention is gpt-oss's reference sdpa for one head over a whole
// sequence, in float64: causal mask, sliding window (mask positions at
// distance ≥ window), the sink appended as an extra logit, its probability
// dropped after the softmax.
func naiveSinkAttention(q, k, v [][]float64, sink, scale float64, window int) [][]float64 {
	n := len(q)
	out := make([][]float64, n)
	for i := 0; i < n; i++ {
		logits := make([]float64, n+1)
		for j := 0; j < n; j++ {
			if j > i || (window > 0 && j <= i-window) {
				logits[j] = math.Inf(-1)
				continue
			}
			for d := range q[i] {
				logits[j] += q[i][d] * k[j][d]
			}
			logits[j] *= scale
		}
		logits[n] = sink
		p := softmax64(logits)
		out[i] = make([]float64, len(q[i]))
		for j := 0; j < n; j++ {
			for d := range out[i] {
				out[i][d] += p[j] * v[j][d]
			}
		}
	}
	return out
}

func TestSinkAttention(t *testing.T) {
	for _, tc := range []struct {
		n, headDim, window int
		sink               float64
	}{{1, 8, 0, 0.5}, {20, 16, 0, -1}, {40, 16, 8, 2}, {40, 16, 128, 0.3}, {17, 8, 1, 1}, {12, 8, 4, math.Inf(-1)}} {
		t.Run(fmt.Sprintf("n%d_w%d_s%v", tc.n, tc.window, tc.sink), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(tc.n), uint64(tc.window)))
			mk := func() ([]float32, [][]float64) {
				f := make([]float32, tc.n*tc.headDim)
				d := make([][]float64, tc.n)
				for i := range d {
					d[i] = make([]float64, tc.headDim)
					for j := range d[i] {
						f[i*tc.headDim+j] = float32(r.NormFloat64())
						d[i][j] = float64(f[i*tc.headDim+j])
					}
				}
				return f, d
			}
			q, q64 := mk()
			k, k64 := mk()
			v, v64 := mk()
			scale := 1 / math.Sqrt(float64(tc.headDim))
			want := naiveSinkAttention(q64, k64, v64, tc.sink, scale, tc.window)
			out := make([]float32, tc.headDim)
			scores := make([]float32, tc.n)
			for i := 0; i < tc.n; i++ {
				SinkAttention(out, q[i*tc.headDim:], k, v, i, tc.headDim, tc.window, float32(tc.sink), float32(scale), scores)
				for d := range out {
					if math.Abs(float64(out[d])-want[i][d]) > 1e-5 {
						t.Fatalf("query %d [%d]: %v, want %v", i, d, out[d], want[i][d])
					}
				}
			}
		})
	}
}
