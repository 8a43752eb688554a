package model

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
	"github.com/sluice-llm/sluice/kernels/cpu"
)

// TestScratchBytes checks that the scratch a host backend gets is sized by
// the row budget, not by the step's token budget: the same bytes for 256,
// 2048 and 8192 tokens (and the sum of its tensors), fewer below the
// budget, and a tensor of logits per output row only.
func TestScratchBytes(t *testing.T) {
	h := randomHF("LlamaForCausalLM", false, false, false, false, 1)
	be := cpu.New(cpu.Options{Threads: 1})
	defer be.Close()
	m, err := Load(h.write(t, "F32"), be, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	c := &m.Cfg
	perRow := int64(4 * (2*c.Dim + 2*c.QDim() + 2*c.KVDim() + 2*c.Hidden))
	perOut := int64(4 * (c.Dim + c.Vocab))
	cases := []struct {
		maxTokens, maxOut, wantRows int
	}{
		{64, 16, 64},
		{256, 16, DefaultScratchRows},
		{2048, 16, DefaultScratchRows},
		{8192, 16, DefaultScratchRows},
		{8192, 256, DefaultScratchRows},
	}
	for _, tc := range cases {
		s := m.NewScratch(tc.maxTokens, tc.maxOut)
		want := int64(tc.wantRows)*perRow + int64(tc.maxOut)*perOut
		if s.Rows() != tc.wantRows || s.Bytes() != want || s.MaxTokens != tc.maxTokens {
			t.Errorf("NewScratch(%d, %d): %d rows, %d bytes, MaxTokens %d; want %d rows, %d bytes", tc.maxTokens, tc.maxOut, s.Rows(), s.Bytes(), s.MaxTokens, tc.wantRows, want)
		}
	}
}

// seqRun is one sequence's share of a batch: count tokens from start.
type seqRun struct{ seq, start, count int }

// batchOf builds the varlen batch of runs over per-sequence block tables
// (full, and win for a split cache), asking for the logits of every row
// in reverse order.
func batchOf(toks [][]int32, runs []seqRun, full, win [][]int32, bs int) *Batch {
	b := &Batch{}
	a, w := &b.Attn, &b.WinAttn
	a.QStart, a.TableStart, a.BlockSize = []int32{0}, []int32{0}, bs
	w.TableStart, w.BlockSize = []int32{0}, bs
	for _, r := range runs {
		for p := r.start; p < r.start+r.count; p++ {
			b.Tokens = append(b.Tokens, toks[r.seq][p])
			b.Pos = append(b.Pos, int32(p))
			a.Slots = append(a.Slots, full[r.seq][p/bs]*int32(bs)+int32(p%bs))
			if win != nil {
				w.Slots = append(w.Slots, win[r.seq][p/bs]*int32(bs)+int32(p%bs))
			}
		}
		a.QStart = append(a.QStart, int32(len(b.Tokens)))
		a.CtxLen = append(a.CtxLen, int32(r.start+r.count))
		a.Tables = append(a.Tables, full[r.seq]...)
		a.TableStart = append(a.TableStart, int32(len(a.Tables)))
		if win != nil {
			w.Tables = append(w.Tables, win[r.seq]...)
			w.TableStart = append(w.TableStart, int32(len(w.Tables)))
		}
	}
	w.QStart, w.CtxLen = a.QStart, a.CtxLen
	for i := len(b.Tokens) - 1; i >= 0; i-- {
		b.OutRows = append(b.OutRows, int32(i))
	}
	return b
}

// stepLogits runs the steps through m with a scratch of rows rows per pass
// and returns every step's logits.
func stepLogits(t *testing.T, m *Model, split bool, rows int, toks [][]int32, steps [][]seqRun) [][]float32 {
	t.Helper()
	const bs = 4
	per := (len(toks[0]) + bs - 1) / bs
	nseq := len(toks)
	full, win := make([][]int32, nseq), [][]int32(nil)
	var kv *KVCache
	if split {
		kv = m.NewSplitKVCache(2*nseq*per, bs)
		win = make([][]int32, nseq)
	} else {
		kv = m.NewKVCache(nseq*per, bs)
	}
	// distinct block ids in a fixed shuffled order
	ids := rand.New(rand.NewPCG(1, 1)).Perm(kv.NumBlocks)
	for s := range nseq {
		for range per {
			full[s], ids = append(full[s], int32(ids[0])), ids[1:]
			if split {
				win[s], ids = append(win[s], int32(ids[0])), ids[1:]
			}
		}
	}
	s := m.NewScratchRows(64, 64, rows)
	var out [][]float32
	for _, runs := range steps {
		b := batchOf(toks, runs, full, win, bs)
		lg, err := m.Forward(s, kv, b)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, append([]float32(nil), lg...))
	}
	return out
}

// TestSubBatchForward checks that a batch larger than the scratch's rows,
// run in passes that cut sequences at arbitrary rows, gives the logits of
// one pass: bit for bit on the ref backend (its ops are row by row), and
// within float rounding on the cpu backend (whose kernels depend on the
// number of rows); dense models and gpt-oss over a split cache. The batches
// mix prefill chunks and decode rows of three sequences over two steps,
// and ask for every row's logits in reverse order.
func TestSubBatchForward(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 2))
	steps := [][]seqRun{
		{{0, 0, 7}, {1, 0, 11}, {2, 0, 3}},
		{{0, 7, 1}, {1, 11, 6}, {2, 3, 9}},
		{{2, 12, 1}, {0, 8, 1}, {1, 17, 1}},
	}
	models := []struct {
		name  string
		path  func(t *testing.T) string
		split bool
	}{
		{"llama-f32", func(t *testing.T) string {
			return randomHF("LlamaForCausalLM", false, false, false, false, 3).write(t, "F32")
		}, false},
		{"qwen2-bias-f16", func(t *testing.T) string {
			return randomHF("Qwen2ForCausalLM", true, true, false, false, 4).write(t, "F16")
		}, false},
		{"gpt-oss-split", func(t *testing.T) string { return randomMoE("gpt_oss", nil, 5).writeGGUF(t) }, true},
	}
	for _, mc := range models {
		t.Run(mc.name, func(t *testing.T) {
			path := mc.path(t)
			for _, bn := range []string{"ref", "cpu"} {
				var be kernels.Backend = kernels.NewRef()
				if bn == "cpu" {
					be = cpu.New(cpu.Options{Threads: 2})
				}
				m, err := Load(path, be, LoadOptions{})
				if err != nil {
					t.Fatal(err)
				}
				toks := make([][]int32, 3)
				for s := range toks {
					for range 20 {
						toks[s] = append(toks[s], int32(r.IntN(m.Cfg.Vocab)))
					}
				}
				want := stepLogits(t, m, mc.split, 64, toks, steps)
				for _, rows := range []int{1, 4, 5, 16} {
					got := stepLogits(t, m, mc.split, rows, toks, steps)
					var maxErr, maxAbs float64
					for i := range want {
						if len(got[i]) != len(want[i]) {
							t.Fatalf("%s rows %d step %d: %d logits, want %d", bn, rows, i, len(got[i]), len(want[i]))
						}
						for j := range want[i] {
							maxErr = math.Max(maxErr, math.Abs(float64(got[i][j]-want[i][j])))
							maxAbs = math.Max(maxAbs, math.Abs(float64(want[i][j])))
						}
					}
					tol := 0.0
					if bn == "cpu" {
						tol = 1e-4 * math.Max(1, maxAbs)
					}
					if maxErr > tol {
						t.Errorf("%s rows %d: max |passes - one pass| = %g (max |logit| %g)", bn, rows, maxErr, maxAbs)
					}
				}
				m.Close()
				be.Close()
			}
		})
	}
}

// TestSubBatchAllocs checks that a batch run in several passes allocates
// nothing once the scratch has seen it.
func TestSubBatchAllocs(t *testing.T) {
	be := cpu.New(cpu.Options{Threads: 2})
	defer be.Close()
	m, err := Load(randomHF("LlamaForCausalLM", false, false, false, false, 6).write(t, "F32"), be, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	toks := [][]int32{make([]int32, 20), make([]int32, 20)}
	full := [][]int32{{0, 1, 2, 3, 4}, {5, 6, 7, 8, 9}}
	kv := m.NewKVCache(10, 4)
	b := batchOf(toks, []seqRun{{0, 0, 13}, {1, 0, 9}}, full, nil, 4)
	s := m.NewScratchRows(32, 32, 5)
	step := func() {
		if _, err := m.Forward(s, kv, b); err != nil {
			t.Fatal(err)
		}
	}
	step()
	if n := testing.AllocsPerRun(5, step); n != 0 {
		t.Errorf("a forward in %d passes allocates %v times", (len(b.Tokens)+4)/5, n)
	}
}
