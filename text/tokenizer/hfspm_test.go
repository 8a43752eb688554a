package tokenizer

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/sluice-llm/sluice/internal/testenv"
	"github.com/sluice-llm/sluice/modelfile/tokfile"
)

// hfLlamaFromGGUF converts a SentencePiece GGUF vocabulary into the
// tokenizer.json that Hugging Face's LlamaConverter produces (BPE with
// merges ordered by the merged piece's score, byte fallback, Prepend+Replace
// normalizer, BOS template), so that the character-BPE path can be checked
// against llama.cpp's vectors.
func hfLlamaFromGGUF(t *testing.T, v *tokfile.GGUFVocab) *tokfile.TokenizerJSON {
	t.Helper()
	vocab := make(map[string]int, len(v.Tokens))
	for id, tok := range v.Tokens {
		vocab[tok] = id
	}
	type cand struct {
		l, r  string
		score float32
	}
	var merges []cand
	for id, piece := range v.Tokens {
		if v.TokenTypes[id] != tokfile.TokenTypeNormal {
			continue
		}
		var local []cand
		for i := 1; i < len(piece); i++ {
			l, r := piece[:i], piece[i:]
			_, okL := vocab[l]
			_, okR := vocab[r]
			if okL && okR {
				local = append(local, cand{l, r, v.Scores[id]})
			}
		}
		sort.SliceStable(local, func(a, b int) bool {
			if vocab[local[a].l] != vocab[local[b].l] {
				return vocab[local[a].l] < vocab[local[b].l]
			}
			return vocab[local[a].r] < vocab[local[b].r]
		})
		merges = append(merges, local...)
	}
	sort.SliceStable(merges, func(a, b int) bool { return merges[a].score > merges[b].score })
	tj := &tokfile.TokenizerJSON{
		Model: tokfile.Model{Type: "BPE", Vocab: vocab, UnkToken: "<unk>", ByteFallback: true, FuseUnk: true},
		Normalizer: &tokfile.Normalizer{Type: "Sequence", Normalizers: []*tokfile.Normalizer{
			{Type: "Prepend", Prepend: "▁"},
			{Type: "Replace", Pattern: tokfile.Pattern{String: " "}, Content: "▁"},
		}},
		Decoder: &tokfile.Decoder{Type: "Sequence", Decoders: []*tokfile.Decoder{
			{Type: "Replace", Pattern: tokfile.Pattern{String: "▁"}, Content: " "},
			{Type: "ByteFallback"}, {Type: "Fuse"}, {Type: "Strip", Content: " ", Start: 1},
		}},
		AddedTokens: []tokfile.AddedToken{
			{ID: 0, Content: "<unk>", Special: true}, {ID: 1, Content: "<s>", Special: true}, {ID: 2, Content: "</s>", Special: true},
		},
	}
	for _, m := range merges {
		tj.Model.Merges = append(tj.Model.Merges, [2]string{m.l, m.r})
	}
	return tj
}

// TestHFCharBPEOnLlamaVectors runs the character-BPE (tokenizer.json) path
// with a Llama-2 vocabulary converted the way Hugging Face converts it, on
// llama.cpp's Llama-2 SentencePiece vectors.
func TestHFCharBPEOnLlamaVectors(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 32000-token merges")
	}
	const dir = "tokenizers/llama-cpp-vocab/"
	v, err := tokfile.ReadGGUFVocab(testenv.SharedFile(t, dir+"ggml-vocab-llama-spm.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := FromTokenizerJSON(hfLlamaFromGGUF(t, v), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.kind != kindRank || !m.chunkOnSpace || !m.stripLeadingSpace {
		t.Fatalf("kind %d chunkOnSpace %v strip %v", m.kind, m.chunkOnSpace, m.stripLeadingSpace)
	}
	base := testenv.SharedFile(t, dir+"ggml-vocab-llama-spm.gguf.inp")
	cases, want := readVocabTests(t, base, strings.TrimSuffix(base, ".inp")+".out")
	for i, text := range cases {
		got := m.EncodeWith(text, Options{})
		if fmt.Sprint(got) != fmt.Sprint(want[i]) {
			t.Errorf("case %d %q:\n got %v\nwant %v", i, text, got, want[i])
		}
		if text != "" && !strings.Contains(text, "▁") {
			if back := m.Decode(got, false); back != text {
				t.Errorf("case %d: round trip %q", i, back)
			}
		}
	}
}

// TestGGUFByteLevelFromJSON converts Llama-3's and Qwen3's tokenizer.json
// into GGUF vocabulary metadata the way llama.cpp's converter does (added
// tokens as CONTROL or USER_DEFINED, merges as "a b", tokenizer.ggml.pre
// naming the split regex) and runs the GGUF path on llama.cpp's vectors.
func TestGGUFByteLevelFromJSON(t *testing.T) {
	const dir = "tokenizers/llama-cpp-vocab/"
	for _, tc := range []struct{ rel, pre, cases string }{
		{"tokenizers/llama3/tokenizer.json", "llama-bpe", dir + "ggml-vocab-llama-bpe.gguf"},
		{"tokenizers/qwen3/tokenizer.json", "qwen2", dir + "ggml-vocab-qwen2.gguf"},
	} {
		t.Run(tc.pre, func(t *testing.T) {
			tj, err := tokfile.ReadTokenizerJSON(testenv.SharedFile(t, tc.rel))
			if err != nil {
				t.Fatal(err)
			}
			n := len(tj.Model.Vocab) + len(tj.AddedTokens)
			v := &tokfile.GGUFVocab{Model: "gpt2", Pre: tc.pre, Tokens: make([]string, n), TokenTypes: make([]int32, n),
				BOS: -1, EOS: -1, UNK: -1, PAD: -1, EOT: -1}
			for tok, id := range tj.Model.Vocab {
				v.Tokens[id], v.TokenTypes[id] = tok, tokfile.TokenTypeNormal
			}
			for _, at := range tj.AddedTokens {
				v.Tokens[at.ID], v.TokenTypes[at.ID] = at.Content, tokfile.TokenTypeUserDefined
				if at.Special {
					v.TokenTypes[at.ID] = tokfile.TokenTypeControl
				}
			}
			v.Merges = tj.Model.Merges
			m, err := FromGGUFVocab(v)
			if err != nil {
				t.Fatal(err)
			}
			base := testenv.SharedFile(t, tc.cases+".inp")
			cases, want := readVocabTests(t, base, strings.TrimSuffix(base, ".inp")+".out")
			for i, text := range cases {
				if got := m.EncodeWith(text, Options{}); fmt.Sprint(got) != fmt.Sprint(want[i]) {
					t.Errorf("case %d %q:\n got %v\nwant %v", i, text, got, want[i])
				}
			}
		})
	}
}
