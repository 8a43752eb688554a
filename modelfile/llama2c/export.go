package llama2c

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sluice-llm/sluice/modelfile/safetensors"
)

// ExportHF writes the llama2.c checkpoint at path as a Hugging Face model
// directory dir (config.json + model.safetensors, F32), the way
// transformers' convert_llama_weights_to_hf.py does: the q/k projection rows
// are permuted from the interleaved (Meta, llama2.c) rotary layout to
// rotate-half, so both files give the same logits. Tokenizer files are not
// written (a llama2.c tokenizer.bin goes with --tokenizer).
func ExportHF(path, dir string) error {
	f, err := Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	c := f.Config
	var ts []safetensors.Tensor
	for _, name := range f.Names() {
		tt, err := f.Tensor(name)
		if err != nil {
			return fmt.Errorf("export %s: %w", path, err)
		}
		data := tt.Data
		switch {
		case strings.HasSuffix(name, "q_proj.weight"):
			data = RotateHalf(data, tt.Rows, tt.Cols, c.Heads)
		case strings.HasSuffix(name, "k_proj.weight"):
			data = RotateHalf(data, tt.Rows, tt.Cols, c.KVHeads)
		}
		shape := []int{tt.Rows, tt.Cols}
		if tt.Rows == 1 {
			shape = []int{tt.Cols}
		}
		ts = append(ts, safetensors.Tensor{Name: name, DType: "F32", Shape: shape, Data: data})
	}
	var buf bytes.Buffer
	if err := safetensors.Write(&buf, ts, nil); err != nil {
		return fmt.Errorf("export %s: %w", path, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("export %s: %w", path, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "model.safetensors"), buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("export %s: %w", path, err)
	}
	cfg, err := json.Marshal(map[string]any{
		"architectures": []string{"LlamaForCausalLM"}, "hidden_size": c.Dim, "intermediate_size": c.HiddenDim,
		"num_hidden_layers": c.Layers, "num_attention_heads": c.Heads, "num_key_value_heads": c.KVHeads,
		"rms_norm_eps": 1e-5, "max_position_embeddings": c.SeqLen, "vocab_size": c.VocabSize,
		"tie_word_embeddings": c.SharedClassifier, "bos_token_id": 1, "eos_token_id": 2,
	})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644); err != nil {
		return fmt.Errorf("export %s: %w", path, err)
	}
	return nil
}

// RotateHalf returns the F32 rows×cols matrix w with each head's rows
// permuted from the interleaved rotary layout to rotate-half: row 2j+half
// of a head becomes row half*hd/2+j.
func RotateHalf(w []byte, rows, cols, heads int) []byte {
	hd, rb := rows/heads, cols*4
	out := make([]byte, len(w))
	for h := 0; h < heads; h++ {
		for j := 0; j < hd/2; j++ {
			for half := 0; half < 2; half++ {
				src, dst := h*hd+2*j+half, h*hd+half*hd/2+j
				copy(out[dst*rb:(dst+1)*rb], w[src*rb:(src+1)*rb])
			}
		}
	}
	return out
}
