package tokenizer

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/sluice-llm/sluice/internal/testenv"
)

// loaded tokenizers are shared between tests: loading Llama-3 or Qwen3
// takes a noticeable fraction of a second.
type loadedSet struct {
	mu sync.Mutex
	m  map[string]*Model
}

var fixtures = loadedSet{m: map[string]*Model{}}

func loadFixture(t testing.TB, rel string) *Model {
	t.Helper()
	path := testenv.SharedFile(t, rel)
	fixtures.mu.Lock()
	defer fixtures.mu.Unlock()
	if m, ok := fixtures.m[path]; ok {
		return m
	}
	var m *Model
	var err error
	switch {
	case strings.HasSuffix(path, ".json"):
		m, err = LoadTokenizerJSON(path)
	case strings.HasSuffix(path, ".gguf"):
		m, err = LoadGGUF(path)
	default:
		m, err = LoadLlama2C(path)
	}
	if err != nil {
		t.Fatal(err)
	}
	fixtures.m[path] = m
	return m
}

// readVocabTests reads llama.cpp's test-tokenizer-0 .inp/.out pair.
func readVocabTests(t *testing.T, inp, out string) ([]string, [][]int32) {
	t.Helper()
	in, err := os.ReadFile(inp)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	cases := strings.Split(string(in), "\n__ggml_vocab_test__\n")
	// the file ends with a separator followed by nothing
	if cases[len(cases)-1] == "" {
		cases = cases[:len(cases)-1]
	}
	lines := strings.Split(strings.TrimSuffix(string(want), "\n"), "\n")
	if len(lines) != len(cases) {
		t.Fatalf("%s: %d cases but %d result lines", inp, len(cases), len(lines))
	}
	ids := make([][]int32, len(lines))
	for i, l := range lines {
		for _, f := range strings.Fields(l) {
			n, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("%s line %d: %v", out, i+1, err)
			}
			ids[i] = append(ids[i], int32(n))
		}
	}
	return cases, ids
}

func TestLlamaCppVocabs(t *testing.T) {
	const dir = "tokenizers/llama-cpp-vocab/"
	tests := []struct {
		name, tokenizer, cases string
	}{
		{"gpt-2", dir + "ggml-vocab-gpt-2.gguf", dir + "ggml-vocab-gpt-2.gguf"},
		{"llama-spm", dir + "ggml-vocab-llama-spm.gguf", dir + "ggml-vocab-llama-spm.gguf"},
		{"phi-3", dir + "ggml-vocab-phi-3.gguf", dir + "ggml-vocab-phi-3.gguf"},
		{"llama-bpe", "tokenizers/llama3/tokenizer.json", dir + "ggml-vocab-llama-bpe.gguf"},
		{"qwen2", "tokenizers/qwen3/tokenizer.json", dir + "ggml-vocab-qwen2.gguf"},
		{"deepseek-r1-qwen", "tokenizers/qwen3/tokenizer.json", dir + "ggml-vocab-deepseek-r1-qwen.gguf"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := loadFixture(t, tc.tokenizer)
			base := testenv.SharedFile(t, tc.cases+".inp")
			cases, want := readVocabTests(t, base, strings.TrimSuffix(base, ".inp")+".out")
			fails := 0
			for i, text := range cases {
				got := m.EncodeWith(text, Options{})
				if fmt.Sprint(got) != fmt.Sprint(want[i]) {
					fails++
					t.Errorf("case %d %q:\n got %v\nwant %v", i, text, got, want[i])
				}
			}
			t.Logf("%d/%d cases match", len(cases)-fails, len(cases))
		})
	}
}

func TestLlama2CVectors(t *testing.T) {
	var ref struct {
		Vectors struct {
			Cases []struct {
				Text string  `json:"text"`
				IDs  []int32 `json:"ids"`
			} `json:"cases"`
		} `json:"llama2c_test_c_tokenizer_vectors"`
		Runs []struct {
			Label     string  `json:"label"`
			Prompt    string  `json:"prompt"`
			PromptIDs []int32 `json:"prompt_ids"`
		} `json:"runs"`
	}
	data, err := os.ReadFile(testenv.SharedFile(t, "reference-outputs.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &ref); err != nil {
		t.Fatal(err)
	}
	if len(ref.Vectors.Cases) == 0 {
		t.Fatal("no llama2.c vectors in reference-outputs.json")
	}
	m := loadFixture(t, "tokenizers/llama2-sentencepiece/tokenizer.bin")
	for _, c := range ref.Vectors.Cases {
		got := m.EncodeWith(c.Text, Options{AddSpecial: true})
		if fmt.Sprint(got) != fmt.Sprint(c.IDs) {
			t.Errorf("%q:\n got %v\nwant %v", c.Text, got, c.IDs)
		}
	}
	aid := loadFixture(t, "aidreams260K/tok512.bin")
	aidGGUF := loadFixture(t, "aidreams260K/aidreams260K-f32.gguf")
	n := 0
	for _, r := range ref.Runs {
		if r.Label != "aidreams260K" || len(r.PromptIDs) == 0 {
			continue
		}
		n++
		for name, tk := range map[string]*Model{"tok512.bin": aid, "gguf": aidGGUF} {
			got := tk.EncodeWith(r.Prompt, Options{AddSpecial: true})
			if fmt.Sprint(got) != fmt.Sprint(r.PromptIDs) {
				t.Errorf("%s %q:\n got %v\nwant %v", name, r.Prompt, got, r.PromptIDs)
			}
		}
	}
	if n == 0 {
		t.Error("no aidreams260K run with prompt_ids in reference-outputs.json")
	}
}
