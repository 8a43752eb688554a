package hfconfig

import (
	"os"
	"path/filepath"
	"testing"
)

func TestParse(t *testing.T) {
	cases := []struct {
		name, json string
		check      func(t *testing.T, c *Config)
		wantErr    bool
	}{
		{"llama3", `{"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":64,"intermediate_size":172,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"rms_norm_eps":1e-5,"rope_theta":500000,"rope_scaling":{"factor":8.0,"low_freq_factor":1.0,"high_freq_factor":4.0,"original_max_position_embeddings":8192,"rope_type":"llama3"},"vocab_size":512,"bos_token_id":1,"eos_token_id":[2,3],"max_position_embeddings":131072}`,
			func(t *testing.T, c *Config) {
				if c.HeadDim != 16 || c.NumKeyValueHeads != 2 || c.RopeScaling.Type != "llama3" || c.RopeScaling.Factor != 8 || *c.BOSTokenID != 1 || len(c.EOSTokenIDs) != 2 || c.TieWordEmbeddings {
					t.Errorf("bad config %+v", c)
				}
			}, false},
		{"defaults", `{"model_type":"qwen3","hidden_size":32,"intermediate_size":64,"num_hidden_layers":1,"num_attention_heads":2,"head_dim":8,"vocab_size":10,"eos_token_id":7,"tie_word_embeddings":true}`,
			func(t *testing.T, c *Config) {
				if c.HeadDim != 8 || c.NumKeyValueHeads != 2 || c.RopeTheta != 10000 || c.RMSNormEps != 1e-6 || !c.TieWordEmbeddings || c.EOSTokenIDs[0] != 7 || c.BOSTokenID != nil {
					t.Errorf("bad config %+v", c)
				}
			}, false},
		{"gqa mismatch", `{"hidden_size":32,"intermediate_size":64,"num_hidden_layers":1,"num_attention_heads":3,"num_key_value_heads":2,"vocab_size":10}`, nil, true},
		{"missing", `{"hidden_size":32}`, nil, true},
		{"not json", `{`, nil, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Parse([]byte(c.json))
			if (err != nil) != c.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, c.wantErr)
			}
			if c.check != nil {
				c.check(t, cfg)
			}
		})
	}
}

func TestLoadGenerationConfig(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"hidden_size":32,"intermediate_size":64,"num_hidden_layers":1,"num_attention_heads":2,"vocab_size":10,"eos_token_id":2}`), 0o644)
	os.WriteFile(filepath.Join(dir, "generation_config.json"), []byte(`{"eos_token_id":[5,6],"bos_token_id":4}`), 0o644)
	c, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.EOSTokenIDs) != 2 || c.EOSTokenIDs[1] != 6 || *c.BOSTokenID != 4 {
		t.Errorf("generation_config not applied: %+v", c)
	}
	if _, err := Load(t.TempDir()); err == nil {
		t.Error("missing config.json: want error")
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"hidden_size":32,"intermediate_size":64,"num_hidden_layers":1,"num_attention_heads":2,"vocab_size":10,"eos_token_id":[1,2]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			return
		}
		if c.HeadDim <= 0 || c.HeadDim%2 != 0 || c.NumKeyValueHeads <= 0 || c.NumAttentionHeads%c.NumKeyValueHeads != 0 {
			t.Fatalf("Parse accepted an inconsistent config: %+v", c)
		}
	})
}
