package e2etest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-llm/sluice/internal/testenv"
	"github.com/sluice-llm/sluice/modelfile/llama2c"
)

// aidreamsRef is the llama2.c run.c greedy reference for aidreams260K.
type aidreamsRef struct {
	Prompt       string  `json:"prompt"`
	Steps        int     `json:"steps"`
	PromptIDs    []int64 `json:"prompt_ids"`
	GeneratedIDs []int64 `json:"generated_ids"`
	OutputText   string  `json:"output_text"`
}

func loadAidreamsRef(t *testing.T) aidreamsRef {
	t.Helper()
	b, err := os.ReadFile(testenv.SharedFile(t, "reference-outputs.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Runs []struct {
			Label string `json:"label"`
			aidreamsRef
		} `json:"runs"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("decode reference-outputs.json: %v", err)
	}
	for _, r := range doc.Runs {
		if r.Label == "aidreams260K" {
			return r.aidreamsRef
		}
	}
	t.Fatal("reference-outputs.json has no aidreams260K run")
	return aidreamsRef{}
}

// exportAidreamsHF converts a llama2.c checkpoint to a Hugging Face directory with
// llama2c.ExportHF (q/k rows permuted to rotate-half RoPE).
func exportAidreamsHF(t *testing.T, path string) string {
	t.Helper()
	dir := t.TempDir()
	if err := llama2c.ExportHF(path, dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// postJSON posts body to base+path and decodes a 200 response into out.
func postJSON(t *testing.T, base, path, body string, out any) {
	t.Helper()
	resp, err := http.Post(base+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: status %d: %s", path, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("POST %s: decode %s: %v", path, b, err)
	}
}

// TestAidreamsGreedyReference serves the real aidreams260K checkpoint in
// its three formats with the CPU executor and checks that greedy decoding
// through /v1/completions reproduces llama2.c run.c token for token.
func TestAidreamsGreedyReference(t *testing.T) {
	models := testenv.SharedModels(t)
	ref := loadAidreamsRef(t)
	bin := filepath.Join(models, "aidreams260K", "aidreams260K.bin")
	tok := filepath.Join(models, "aidreams260K", "tok512.bin")
	gguf := filepath.Join(models, "aidreams260K", "aidreams260K-f32.gguf")
	if len(ref.PromptIDs)+len(ref.GeneratedIDs) != ref.Steps+1 {
		t.Fatalf("reference: %d prompt + %d generated ids for %d steps", len(ref.PromptIDs), len(ref.GeneratedIDs), ref.Steps)
	}
	// run.c prints the prompt then each generated piece and adds "\n".
	wantText, ok := strings.CutPrefix(strings.TrimSuffix(ref.OutputText, "\n"), ref.Prompt)
	if !ok {
		t.Fatalf("reference output %q does not start with the prompt %q", ref.OutputText, ref.Prompt)
	}
	ids, _ := json.Marshal(ref.PromptIDs)
	n := len(ref.GeneratedIDs)
	for _, tc := range []struct {
		name  string
		model func() string
		tok   []string
	}{
		{"llama2c-bin", func() string { return bin }, []string{"--tokenizer", tok}},
		{"gguf", func() string { return gguf }, nil},
		{"safetensors-hf", func() string { return exportAidreamsHF(t, bin) }, []string{"--tokenizer", tok}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := tc.model()
			addr := engineAddr(t)
			startEngine(t, addr, append([]string{"--executor", "cpu", "--model", model}, tc.tok...)...)
			base, _ := startFrontend(t, addr, append([]string{"--model", model}, tc.tok...)...)

			// the server's tokenizer gives run.c's prompt ids (BOS included)
			var tk struct {
				Tokens []int64 `json:"tokens"`
				Count  int     `json:"count"`
			}
			postJSON(t, base, "/tokenize", fmt.Sprintf(`{"prompt":%q}`, ref.Prompt), &tk)
			if fmt.Sprint(tk.Tokens) != fmt.Sprint(ref.PromptIDs) {
				t.Fatalf("/tokenize %q = %v, want %v", ref.Prompt, tk.Tokens, ref.PromptIDs)
			}
			// the text of each reference token in context, from /detokenize
			// of growing prefixes (a lone token loses its leading space)
			pieces := make([]string, n)
			var pd struct {
				Prompt string `json:"prompt"`
			}
			pids, _ := json.Marshal(ref.PromptIDs)
			postJSON(t, base, "/detokenize", fmt.Sprintf(`{"tokens":%s}`, pids), &pd)
			// like HF decode with special tokens kept: "<s> Once upon a time"
			if strings.TrimSpace(strings.TrimPrefix(pd.Prompt, "<s>")) != ref.Prompt {
				t.Errorf("/detokenize of the prompt ids = %q, want %q", pd.Prompt, ref.Prompt)
			}
			prev := pd.Prompt
			for i := range n {
				seq, _ := json.Marshal(append(append([]int64(nil), ref.PromptIDs...), ref.GeneratedIDs[:i+1]...))
				var dt struct {
					Prompt string `json:"prompt"`
				}
				postJSON(t, base, "/detokenize", fmt.Sprintf(`{"tokens":%s}`, seq), &dt)
				if !strings.HasPrefix(dt.Prompt, prev) {
					t.Fatalf("/detokenize of %d tokens %q does not extend %q", len(seq), dt.Prompt, prev)
				}
				pieces[i], prev = dt.Prompt[len(prev):], dt.Prompt
			}
			if strings.Join(pieces, "") != wantText {
				t.Fatalf("reference ids detokenize to %q, want %q", strings.Join(pieces, ""), wantText)
			}
			type completion struct {
				Choices []struct {
					Text         string `json:"text"`
					FinishReason string `json:"finish_reason"`
					Logprobs     *struct {
						Tokens []string `json:"tokens"`
					} `json:"logprobs"`
				} `json:"choices"`
				Usage struct {
					PromptTokens     int `json:"prompt_tokens"`
					CompletionTokens int `json:"completion_tokens"`
				} `json:"usage"`
			}
			for _, prompt := range []string{fmt.Sprintf("%q", ref.Prompt), string(ids)} {
				var c completion
				postJSON(t, base, "/v1/completions", fmt.Sprintf(`{"prompt":%s,"max_tokens":%d,"temperature":0,"logprobs":0}`, prompt, n), &c)
				if len(c.Choices) != 1 {
					t.Fatalf("prompt %s: %d choices", prompt, len(c.Choices))
				}
				ch := c.Choices[0]
				if c.Usage.PromptTokens != len(ref.PromptIDs) || c.Usage.CompletionTokens != n {
					t.Errorf("prompt %s: usage %+v, want %d prompt and %d completion tokens", prompt, c.Usage, len(ref.PromptIDs), n)
				}
				if ch.Logprobs == nil || len(ch.Logprobs.Tokens) != n {
					t.Fatalf("prompt %s: logprobs %+v, want %d tokens", prompt, ch.Logprobs, n)
				}
				for i, p := range ch.Logprobs.Tokens {
					if p != pieces[i] {
						t.Fatalf("prompt %s: token %d is %q, run.c's id %d is %q", prompt, i, p, ref.GeneratedIDs[i], pieces[i])
					}
				}
				if ch.Text != wantText || ch.FinishReason != "length" {
					t.Fatalf("prompt %s: text %q finish %q\nwant text %q finish length", prompt, ch.Text, ch.FinishReason, wantText)
				}
			}
			// streaming gives the same text (the chunk count is free: the
			// mailbox merges deltas when the client lags the engine)
			evs := rawStream(t, base, "/v1/completions", fmt.Sprintf(`{"prompt":%s,"max_tokens":%d,"temperature":0,"stream":true,"stream_interval":1,"stream_options":{"include_usage":true}}`, ids, n))
			text, _, completionTokens, finish, _ := collect(t, evs)
			if text != wantText || finish != "length" || completionTokens != n {
				t.Fatalf("stream: text %q finish %q, %d completion tokens", text, finish, completionTokens)
			}
		})
	}
}
