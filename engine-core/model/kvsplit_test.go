package model

import (
	"testing"

	"github.com/sluice-llm/sluice/engine-core/kvcache"
	"github.com/sluice-llm/sluice/kernels"
)

// allLogitsSplit is allLogits over a split KV cache (NewSplitKVCache): the
// full layers' table keeps every block, the window layers' table takes its
// blocks from the same kvcache.Pool and gives back, before each chunk,
// every block wholly before the chunk's window (its entry becomes
// kvcache.NoBlock, which the kernels would fault on if they read it). The
// pool reuses given-back blocks at once, so a window layer reading one
// would also see another layer's keys. It returns nil for a model without
// a window group.
func allLogitsSplit(t *testing.T, m *Model, toks []int32, chunks []int) [][]float32 {
	t.Helper()
	w := m.KVWindow()
	if w == 0 {
		return nil
	}
	const bs = 4
	nb := (len(toks) + bs - 1) / bs
	pool := kvcache.New(nb+(w+bs-1)/bs+max(chunks[0], chunks[len(chunks)-1])/bs+4, bs)
	kv := m.NewSplitKVCache(pool.NumBlocks(), bs)
	var full, win []int32
	s := m.NewScratch(len(toks), len(toks))
	var out [][]float32
	start, maxLive := 0, 0
	for _, c := range chunks {
		first := max(0, start-w+1) / bs
		for i := range min(first, len(win)) {
			if win[i] != kvcache.NoBlock {
				pool.Free(win[i : i+1])
				win[i] = kvcache.NoBlock
			}
		}
		for len(win) < first {
			win = append(win, kvcache.NoBlock)
		}
		var ok bool
		if full, ok = pool.Allocate(pool.BlocksFor(start+c)-len(full), full); !ok {
			t.Fatal("pool ran out for the full table")
		}
		if win, ok = pool.Allocate(pool.BlocksFor(start+c)-len(win), win); !ok {
			t.Fatal("pool ran out for the window table")
		}
		live := 0
		for _, id := range win {
			if id != kvcache.NoBlock {
				live++
			}
		}
		maxLive = max(maxLive, live)
		b := &Batch{Tokens: toks[start : start+c]}
		for i := 0; i < c; i++ {
			p := int32(start + i)
			b.Pos = append(b.Pos, p)
			b.OutRows = append(b.OutRows, int32(i))
			b.Attn.Slots = append(b.Attn.Slots, full[p/bs]*bs+p%bs)
			b.WinAttn.Slots = append(b.WinAttn.Slots, win[p/bs]*bs+p%bs)
		}
		b.Attn.QStart = []int32{0, int32(c)}
		b.Attn.CtxLen = []int32{int32(start + c)}
		b.Attn.Tables, b.Attn.TableStart, b.Attn.BlockSize = full, []int32{0, int32(len(full))}, bs
		b.WinAttn.QStart, b.WinAttn.CtxLen, b.WinAttn.BlockSize = b.Attn.QStart, b.Attn.CtxLen, bs
		b.WinAttn.Tables, b.WinAttn.TableStart = win, []int32{0, int32(len(win))}
		lg, err := m.Forward(s, kv, b)
		if err != nil {
			t.Fatal(err)
		}
		v := m.Cfg.Vocab
		for i := 0; i < c; i++ {
			out = append(out, append([]float32(nil), lg[i*v:(i+1)*v]...))
		}
		start += c
	}
	if first := max(0, start-1-w+1) / bs; first == 0 || maxLive >= len(full) {
		t.Fatalf("context %d never left the window %d behind (window table held up to %d of %d blocks)", start, w, maxLive, len(full))
	}
	return out
}

// TestSplitKVCacheLayout checks the split cache's shape on a gpt-oss-like
// model with unequal groups (window, full, window): two K/V tensor pairs,
// the window layers on distinct tensors and the full layer sharing the
// first window layer's, and a block's bytes counting the larger group; and
// that a forward pass without the window tables is refused.
func TestSplitKVCacheLayout(t *testing.T) {
	mm := randomMoE("gpt_oss", nil, 5)
	m, err := Load(mm.writeGGUF(t), kernels.NewRef(), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.KVWindow() != mm.window {
		t.Fatalf("KVWindow = %d, want %d", m.KVWindow(), mm.window)
	}
	kv := m.NewSplitKVCache(6, 4)
	if kv.Window != mm.window || kv.K[0] == kv.K[2] || kv.K[1] != kv.K[0] || kv.V[1] != kv.V[0] {
		t.Fatalf("split layout: window %d, K tensors shared %v %v", kv.Window, kv.K[0] == kv.K[2], kv.K[1] == kv.K[0])
	}
	if got, want := m.SplitKVBytesPerBlock(4), m.KVBytesPerBlock(4)*2/3; got != want {
		t.Errorf("SplitKVBytesPerBlock = %d, want %d", got, want)
	}
	b := &Batch{Tokens: []int32{1}, Pos: []int32{0}, OutRows: []int32{0}}
	b.Attn = kernels.AttnBatch{QStart: []int32{0, 1}, CtxLen: []int32{1}, Tables: []int32{0}, TableStart: []int32{0, 1}, BlockSize: 4, Slots: []int32{0}}
	if _, err := m.Forward(m.NewScratch(1, 1), kv, b); err == nil {
		t.Error("forward over a split cache without WinAttn: want error")
	}
	if _, err := m.Forward(m.NewScratch(1, 1), m.NewKVCache(6, 4), b); err != nil {
		t.Errorf("forward over a one-group cache: %v", err)
	}
}
