package model

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-llm/sluice/kernels"
	"github.com/sluice-llm/sluice/kernels/cpu"
)

// BenchmarkMoEFileDecode loads each model file in $SLUICE_BENCH_MOE
// (colon-separated; e.g. `engine-core gen-model --shape gpt-oss-20b
// --format gguf-mxfp4`) on the CPU backend and times one-sequence decode
// steps of 1 and 16 sequences (the model's Forward, no runner), reporting
// tok/s, CPU-ms per token, the resident set after load and after decoding, the file's
// weight bytes and the backend's parallel ops per step.
func BenchmarkMoEFileDecode(b *testing.B) {
	env := os.Getenv("SLUICE_BENCH_MOE")
	if env == "" {
		b.Skip("SKIP: set SLUICE_BENCH_MOE to model files (engine-core gen-model writes them)")
	}
	for _, path := range strings.Split(env, ":") {
		b.Run(filepath.Base(filepath.Dir(path)), func(b *testing.B) {
			rss0 := rssBytes(b)
			be := cpu.New(cpu.Options{QuantizeActivations: true}) // the runner's default (--exact-q8 turns it off)
			defer be.Close()
			m, err := Load(path, be, LoadOptions{MaxPos: 1024})
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			rssLoad := rssBytes(b) - rss0
			const bs, maxCtx = 16, 256
			// seqsN: the experts' pages are mapped as the steps first touch
			// them (a freshly loaded model); seqsN-warm: every expert's
			// pages are touched first, as after serving long enough that
			// each expert was chosen (the steady state)
			for _, warm := range []bool{false, true} {
				for _, nseq := range []int{1, 16} {
					name := fmt.Sprintf("seqs%d", nseq)
					if warm {
						name += "-warm"
						touchExperts(m)
					}
					b.Run(name, func(b *testing.B) {
						decodeSteps(b, m, nseq, bs, maxCtx, rss0, rssLoad, false)
					})
					// -loop: the per-expert ops instead of moeFFNFused
					b.Run(name+"-loop", func(b *testing.B) {
						decodeSteps(b, m, nseq, bs, maxCtx, rss0, rssLoad, true)
					})
				}
			}
		})
	}
}

// decodeSteps times one-token decode steps of nseq sequences (each with
// its own blocks, contexts growing from 1 to maxCtx and wrapping); with
// perExpert the expert blocks run their per-expert ops (moeFFN's loop)
// instead of moeFFNFused.
func decodeSteps(b *testing.B, m *Model, nseq, bs, maxCtx int, rss0, rssLoad int64, perExpert bool) {
	nb := maxCtx / bs
	kv := m.NewKVCache(nseq*nb, bs)
	s := m.NewScratch(nseq, nseq)
	if perExpert && s.moe != nil {
		s.moe.fused = nil
	}
	batch := &Batch{Attn: kernels.AttnBatch{BlockSize: bs, QStart: []int32{0}, TableStart: []int32{0}}}
	for q := 0; q < nseq; q++ {
		batch.Tokens = append(batch.Tokens, int32(q+1))
		batch.Pos = append(batch.Pos, 0)
		batch.OutRows = append(batch.OutRows, int32(q))
		for i := 0; i < nb; i++ {
			batch.Attn.Tables = append(batch.Attn.Tables, int32(q*nb+i))
		}
		batch.Attn.TableStart = append(batch.Attn.TableStart, int32((q+1)*nb))
		batch.Attn.QStart = append(batch.Attn.QStart, int32(q+1))
		batch.Attn.CtxLen = append(batch.Attn.CtxLen, 1)
		batch.Attn.Slots = append(batch.Attn.Slots, int32(q*nb*bs))
	}
	step := func() {
		if _, err := m.Forward(s, kv, batch); err != nil {
			b.Fatal(err)
		}
		for q := 0; q < nseq; q++ {
			p := (batch.Pos[q] + 1) % int32(maxCtx)
			batch.Pos[q], batch.Attn.CtxLen[q] = p, p+1
			batch.Attn.Slots[q] = int32(q*nb*bs) + p
			batch.Tokens[q] = (batch.Tokens[q]*7919 + 13) % int32(m.Cfg.Vocab)
		}
	}
	step()
	groups := s.recordGroups()
	clear(groups)
	rec, _ := m.be.(interface {
		RecordOps(on bool)
		OpStats() cpu.OpStats
	})
	if os.Getenv("SLUICE_BENCH_OPSTATS") == "" {
		rec = nil // recording locks the pool's threads: off for the figures compared
	}
	if rec != nil {
		rec.RecordOps(true)
	}
	disp, _ := m.be.(interface{ Dispatches() uint64 })
	var d0 uint64
	if disp != nil {
		d0 = disp.Dispatches()
	}
	b.ResetTimer()
	cpu0 := benchCPUTime()
	for i := 0; i < b.N; i++ {
		step()
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N*nseq)/b.Elapsed().Seconds(), "tok/s")
	b.ReportMetric(float64(benchCPUTime()-cpu0)/1e6/float64(b.N*nseq), "cpu-ms/tok")
	b.ReportMetric(float64(rssLoad)/1e6, "rss-load-MB")
	b.ReportMetric(float64(rssBytes(b)-rss0)/1e6, "rss-decode-MB")
	b.ReportMetric(float64(m.WeightBytes())/1e6, "weights-MB")
	if disp != nil {
		b.ReportMetric(float64(disp.Dispatches()-d0)/float64(b.N), "dispatches/step")
	}
	if rec != nil {
		st := rec.OpStats()
		rec.RecordOps(false)
		b.ReportMetric(100*st.Imbalance(), "op-wait-%")
		if d := benchCPUTime() - cpu0; d > 0 {
			b.ReportMetric(100*float64(st.ChunkCPU)/float64(d), "ops-cpu-%")
		}
	}
	if m.Cfg.MoE != nil {
		reportGroups(b, groups, nseq*m.Cfg.MoE.MoE.TopK)
	}
}

// reportGroups reports the distribution of rows per active expert that
// recordGroups counted over steps of slots routed rows a layer:
// experts/layer (distinct experts read per layer and step) and the share
// of active experts with 1, 2, 3, 4 and 5 or more rows (rows1-% …
// rows5+-%). Nothing without counts (dense models, the per-expert path).
func reportGroups(b *testing.B, groups []int64, slots int) {
	var active, rows int64
	for g, c := range groups {
		active += c
		rows += int64(g) * c
	}
	if active == 0 {
		return
	}
	layerSteps := float64(rows) / float64(slots)
	b.ReportMetric(float64(active)/layerSteps, "experts/layer")
	var five int64
	for g, c := range groups {
		switch {
		case g >= 1 && g <= 4:
			b.ReportMetric(100*float64(c)/float64(active), fmt.Sprintf("rows%d-%%", g))
		case g >= 5:
			five += c
		}
	}
	b.ReportMetric(100*float64(five)/float64(active), "rows5+-%")
}

// touchSink keeps touchExperts' reads.
var touchSink byte

// touchExperts reads one byte of every page of every expert matrix held
// in host memory, so that the memory-mapped ones are all mapped.
func touchExperts(m *Model) {
	var s byte
	for l := range m.Layers {
		for _, e := range m.Layers[l].Experts {
			for _, t := range []kernels.Tensor{e.Gate, e.Up, e.Down} {
				if h, ok := t.(*kernels.Host); ok {
					for i := 0; i < len(h.Q); i += 4096 {
						s += h.Q[i]
					}
				}
			}
		}
	}
	touchSink += s
}

// benchCPUTime is the process's user+system CPU time.
func benchCPUTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
