package model

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseMoEArch(t *testing.T) {
	read := func(name string) []byte {
		data, err := os.ReadFile(filepath.Join("testdata", "moe", name))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	t.Run("gpt-oss-20b", func(t *testing.T) {
		a, err := ParseMoEArch(read("gpt-oss-20b.config.json"))
		if err != nil {
			t.Fatal(err)
		}
		want := MoEConfig{Dim: 2880, Hidden: 2880, Experts: 32, TopK: 4, Routing: RouteTopKSoftmax, Act: ActClampedSwiGLU, Alpha: 1.702, Limit: 7}
		if a.MoE != want || a.Family != "gpt_oss" || !a.Sinks || !a.AttentionBias || a.SlidingWindow != 128 || a.Quant != "mxfp4" {
			t.Errorf("got %+v", a)
		}
		for l := 0; l < 24; l++ {
			if !a.SparseLayer[l] || a.SlidingLayer[l] != (l%2 == 0) {
				t.Errorf("layer %d: sparse %v sliding %v", l, a.SparseLayer[l], a.SlidingLayer[l])
			}
		}
		if y := a.YaRN; y == nil || *y != (YaRN{Factor: 32, OriginalMaxPos: 4096, BetaFast: 32, BetaSlow: 1, Truncate: false}) {
			t.Errorf("yarn %+v", a.YaRN)
		}
	})
	t.Run("qwen3-30b-a3b", func(t *testing.T) {
		a, err := ParseMoEArch(read("qwen3-30b-a3b.config.json"))
		if err != nil {
			t.Fatal(err)
		}
		want := MoEConfig{Dim: 2048, Hidden: 768, Experts: 128, TopK: 8, Routing: RouteSoftmaxTopK, NormTopK: true, Act: ActSwiGLU}
		if a.MoE != want || a.Family != "qwen3_moe" || a.Sinks || a.AttentionBias || a.YaRN != nil || a.Quant != "" {
			t.Errorf("got %+v", a)
		}
		for l, s := range a.SparseLayer {
			if !s || a.SlidingLayer[l] {
				t.Errorf("layer %d: sparse %v sliding %v", l, s, a.SlidingLayer[l])
			}
		}
	})
	t.Run("qwen3 sparse step and dense layers", func(t *testing.T) {
		a, err := ParseMoEArch([]byte(`{"model_type":"qwen3_moe","hidden_size":64,"num_hidden_layers":6,"num_experts":4,
			"num_experts_per_tok":2,"moe_intermediate_size":32,"decoder_sparse_step":2,"mlp_only_layers":[3]}`))
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		for _, s := range a.SparseLayer {
			if s {
				got += "M"
			} else {
				got += "d"
			}
		}
		if got != "dMdddM" || a.MoE.NormTopK {
			t.Errorf("layers %s, norm_topk_prob %v (default false)", got, a.MoE.NormTopK)
		}
	})
}

func TestParseMoEArchErrors(t *testing.T) {
	tests := []struct{ name, json, want string }{
		{"syntax", `{`, "parse config.json"},
		{"dense family", `{"model_type":"llama","hidden_size":8,"num_hidden_layers":1}`, "not a mixture-of-experts family"},
		{"no layers", `{"model_type":"gpt_oss","hidden_size":8}`, "num_hidden_layers"},
		{"layer types", `{"model_type":"gpt_oss","hidden_size":64,"intermediate_size":64,"num_hidden_layers":2,"num_local_experts":4,"num_experts_per_tok":2,"layer_types":["sliding_attention"]}`, "layer_types"},
		{"bad layer type", `{"model_type":"gpt_oss","hidden_size":64,"intermediate_size":64,"num_hidden_layers":1,"num_local_experts":4,"num_experts_per_tok":2,"layer_types":["x"]}`, "unknown"},
		{"top-k", `{"model_type":"qwen3_moe","hidden_size":64,"num_hidden_layers":1,"num_experts":2,"num_experts_per_tok":4,"moe_intermediate_size":8}`, "top-4 of 2"},
		{"yarn", `{"model_type":"gpt_oss","hidden_size":64,"intermediate_size":64,"num_hidden_layers":1,"num_local_experts":4,"num_experts_per_tok":2,"rope_scaling":{"rope_type":"yarn"}}`, "yarn"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ParseMoEArch([]byte(tc.json)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want mention of %q", err, tc.want)
			}
		})
	}
}

// FuzzParseMoEArch checks that no config.json makes the parser panic and
// that what it accepts is a runnable MoE configuration.
func FuzzParseMoEArch(f *testing.F) {
	for _, n := range []string{"gpt-oss-20b.config.json", "qwen3-30b-a3b.config.json"} {
		data, err := os.ReadFile(filepath.Join("testdata", "moe", n))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := ParseMoEArch(data)
		if err != nil {
			return
		}
		if err := a.MoE.validate(); err != nil || len(a.SparseLayer) != len(a.SlidingLayer) {
			t.Fatalf("accepted an invalid config: %v %+v", err, a)
		}
	})
}
