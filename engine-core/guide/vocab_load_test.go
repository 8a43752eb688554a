package guide

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/sluice-llm/sluice/internal/testenv"
)

// gpt2ByteDecoder maps the byte-level BPE alphabet back to bytes.
func gpt2ByteDecoder() map[rune]byte {
	var bs []int
	for b := '!'; b <= '~'; b++ {
		bs = append(bs, int(b))
	}
	for b := 0xA1; b <= 0xAC; b++ {
		bs = append(bs, b)
	}
	for b := 0xAE; b <= 0xFF; b++ {
		bs = append(bs, b)
	}
	in := map[int]bool{}
	for _, b := range bs {
		in[b] = true
	}
	dec := map[rune]byte{}
	for _, b := range bs {
		dec[rune(b)] = byte(b)
	}
	n := 0
	for b := 0; b < 256; b++ {
		if !in[b] {
			dec[rune(256+n)] = byte(b)
			n++
		}
	}
	return dec
}

// loadHFVocab reads a byte-level BPE tokenizer.json (Llama-3, Qwen3):
// minimal, for tests and benchmarks only.
func loadHFVocab(t testing.TB, path string, eosNames ...string) *Vocab {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Model struct {
			Vocab map[string]int32 `json:"vocab"`
		} `json:"model"`
		Added []struct {
			ID      int32  `json:"id"`
			Content string `json:"content"`
			Special bool   `json:"special"`
		} `json:"added_tokens"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	n := int32(0)
	for _, id := range doc.Model.Vocab {
		n = max(n, id+1)
	}
	for _, a := range doc.Added {
		n = max(n, a.ID+1)
	}
	dec := gpt2ByteDecoder()
	toks := make([][]byte, n)
	special := make([]bool, n)
	for s, id := range doc.Model.Vocab {
		var b []byte
		for _, r := range s {
			c, ok := dec[r]
			if !ok {
				t.Fatalf("token %q: rune %q outside the byte alphabet", s, r)
			}
			b = append(b, c)
		}
		toks[id] = b
	}
	ids := map[string]int32{}
	for _, a := range doc.Added {
		toks[a.ID] = []byte(a.Content)
		special[a.ID] = a.Special
		ids[a.Content] = a.ID
	}
	var eos []int32
	for _, name := range eosNames {
		id, ok := ids[name]
		if !ok {
			t.Fatalf("%s: no token %s", path, name)
		}
		eos = append(eos, id)
	}
	v, err := NewVocab(toks, eos, func(id int32) bool { return special[id] })
	if err != nil {
		t.Fatal(err)
	}
	return v
}

var byteTokenRE = regexp.MustCompile(`^<0x([0-9A-Fa-f]{2})>$`)

// loadLlama2C reads llama2.c's tokenizer.bin (Llama-2 SentencePiece
// vocabulary: "▁" is a space, <0xNN> a byte; ids 0-2 are special).
func loadLlama2C(t testing.TB, path string) *Vocab {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var toks [][]byte
	for off := 4; off < len(raw); {
		if off+8 > len(raw) {
			t.Fatalf("%s: truncated", path)
		}
		_ = math.Float32frombits(binary.LittleEndian.Uint32(raw[off:]))
		l := int(binary.LittleEndian.Uint32(raw[off+4:]))
		off += 8
		if off+l > len(raw) {
			t.Fatalf("%s: truncated token", path)
		}
		s := string(raw[off : off+l])
		off += l
		if m := byteTokenRE.FindStringSubmatch(s); m != nil {
			b, _ := strconv.ParseUint(m[1], 16, 8)
			toks = append(toks, []byte{byte(b)})
			continue
		}
		var b []byte
		for _, r := range s {
			if r == '▁' {
				b = append(b, ' ')
			} else {
				b = fmt.Appendf(b, "%c", r)
			}
		}
		toks = append(toks, b)
	}
	v, err := NewVocab(toks, []int32{2}, func(id int32) bool { return id < 3 })
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// realVocabs loads the three benchmark vocabularies (skipping when the
// shared fixtures are absent).
func realVocabs(t testing.TB) []struct {
	name string
	v    *Vocab
} {
	return []struct {
		name string
		v    *Vocab
	}{
		{"llama2", loadLlama2C(t, testenv.SharedFile(t, "tokenizers/llama2-sentencepiece/tokenizer.bin"))},
		{"llama3", loadHFVocab(t, testenv.SharedFile(t, "tokenizers/llama3/tokenizer.json"), "<|end_of_text|>", "<|eot_id|>")},
		{"qwen3", loadHFVocab(t, testenv.SharedFile(t, "tokenizers/qwen3/tokenizer.json"), "<|endoftext|>", "<|im_end|>")},
	}
}

func testenvFile(t testing.TB, rel string) string { return testenv.SharedFile(t, rel) }
