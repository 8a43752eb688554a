package engine

import (
	"testing"

	"github.com/sluice-llm/sluice/modelfile/hfconfig"
)

// TestSimKVBlock checks the simulator's KV block size and window against
// the cpu executor's layout: one table for dense models (and for models
// whose layers all slide or none do), a window table with blocks of one
// group's layers for gpt-oss's alternating layers.
func TestSimKVBlock(t *testing.T) {
	alt := func(n int) []string {
		var lt []string
		for l := range n {
			lt = append(lt, map[bool]string{true: "sliding_attention", false: "full_attention"}[l%2 == 0])
		}
		return lt
	}
	for _, c := range []struct {
		name       string
		hc         hfconfig.Config
		wantBlock  int64
		wantWindow int
	}{
		{"llama-1b", hfconfig.Config{NumHiddenLayers: 16, NumAttentionHeads: 32, NumKeyValueHeads: 8, HiddenSize: 2048}, 2 * 2 * 16 * 8 * 64 * 16, 0},
		{"gpt-oss-20b", hfconfig.Config{NumHiddenLayers: 24, NumAttentionHeads: 64, NumKeyValueHeads: 8, HeadDim: 64, SlidingWindow: 128, LayerTypes: alt(24)}, 2 * 2 * 12 * 8 * 64 * 16, 128},
		{"qwen2-window-unused", hfconfig.Config{NumHiddenLayers: 4, NumAttentionHeads: 4, HeadDim: 8, SlidingWindow: 4096}, 2 * 2 * 4 * 4 * 8 * 16, 0},
		{"all-sliding", hfconfig.Config{NumHiddenLayers: 2, NumAttentionHeads: 2, HeadDim: 8, SlidingWindow: 8, LayerTypes: []string{"sliding_attention", "sliding_attention"}}, 2 * 2 * 2 * 2 * 8 * 16, 0},
		{"three-layers", hfconfig.Config{NumHiddenLayers: 3, NumAttentionHeads: 2, HeadDim: 8, SlidingWindow: 8, LayerTypes: alt(3)}, 2 * 2 * 2 * 2 * 8 * 16, 8},
	} {
		block, window := simKVBlock(&c.hc, 16)
		if block != c.wantBlock || window != c.wantWindow {
			t.Errorf("%s: block %d window %d, want %d and %d", c.name, block, window, c.wantBlock, c.wantWindow)
		}
	}
}
