package tokenizer

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/sluice-llm/sluice/internal/testenv"
)

// mixedText returns about n bytes of deterministic mixed text: prose, code,
// digits, whitespace runs and non-Latin scripts, with made-up words and
// numbers mixed in so that the piece cache also sees misses.
func mixedText(n int, seed int64) string {
	rng := rand.New(rand.NewSource(seed))
	parts := []string{
		"The quick brown fox jumps over the lazy dog. ", "It's what we'd've done, isn't it? ",
		"func main() {\n\tfmt.Println(\"hello, world\")\n}\n", "for (int i = 0; i < n; ++i) { sum += a[i] * 3.14159; }\n",
		"    return x;\n\n", "Größe über Straße — naïve café. ",
		"日本語のテキストと漢字。", "Привет, как дела? ", "مرحبا بالعالم ", "🚀🦙✅ emoji 😶‍🌫️ ",
		"\r\n", "   \t  ", "<html><body class=\"x\">Hi &amp; bye</body></html>\n", "ünïcödé ½ ¼ Ⅻ ",
		"SELECT * FROM users WHERE id = 42;\n", "# Heading\n\n- item one\n- item two\n",
	}
	alphabets := [][]rune{
		[]rune("etaoinshrdlucmfwypvbgkjqxz"), []rune("ETAOINSHRDLU"), []rune("абвгдежзиклмнопрст"),
		[]rune("αβγδεζηθικλμν"), []rune("的一是不了人我在有他这中"), []rune("äöüßéèàç"),
	}
	var b strings.Builder
	for b.Len() < n {
		switch rng.Intn(4) {
		case 0, 1:
			b.WriteString(parts[rng.Intn(len(parts))])
		case 2: // made-up word
			a := alphabets[rng.Intn(len(alphabets))]
			for k := 1 + rng.Intn(9); k > 0; k-- {
				b.WriteRune(a[rng.Intn(len(a))])
			}
			b.WriteString([]string{" ", " ", ", ", ". ", "\n", "_", "("}[rng.Intn(7)])
		case 3:
			fmt.Fprintf(&b, "%d ", rng.Int63n(1<<(1+rng.Intn(40))))
		}
	}
	return b.String()
}

func TestRoundTrip(t *testing.T) {
	text := mixedText(20000, 1)
	for _, rel := range []string{
		"tokenizers/llama3/tokenizer.json",
		"tokenizers/qwen3/tokenizer.json",
		"tokenizers/llama-cpp-vocab/ggml-vocab-gpt-2.gguf",
		"tokenizers/llama-cpp-vocab/ggml-vocab-llama-spm.gguf",
		"tokenizers/llama2-sentencepiece/tokenizer.bin",
		"aidreams260K/tok512.bin",
	} {
		t.Run(filepath.Base(filepath.Dir(rel))+"/"+filepath.Base(rel), func(t *testing.T) {
			m := loadFixture(t, rel)
			ids := m.EncodeWith(text, Options{})
			if got := m.Decode(ids, false); got != text {
				t.Errorf("round trip differs (%d ids); first difference at byte %d", len(ids), firstDiff(got, text))
			}
			if len(ids) == 0 || len(ids) > len(text) {
				t.Errorf("%d ids for %d bytes", len(ids), len(text))
			}
		})
	}
}

func firstDiff(a, b string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func TestSpecialTokens(t *testing.T) {
	q := loadFixture(t, "tokenizers/qwen3/tokenizer.json")
	imStart, ok1 := q.TokenID("<|im_start|>")
	imEnd, ok2 := q.TokenID("<|im_end|>")
	think, ok3 := q.TokenID("<think>")
	if !ok1 || !ok2 || !ok3 || imStart != 151644 || imEnd != 151645 || think != 151667 {
		t.Fatalf("TokenID: %d %d %d", imStart, imEnd, think)
	}
	text := "<|im_start|>user\nHi<|im_end|><think>x</think>"
	ids := q.Encode(text, true)
	if ids[0] != imStart || !slices.Contains(ids, imEnd) || !slices.Contains(ids, think) {
		t.Errorf("special tokens not matched: %v", ids)
	}
	if got := q.Decode(ids, false); got != text {
		t.Errorf("Decode = %q", got)
	}
	if got := q.Decode(ids, true); got != "user\nHi<think>x</think>" {
		t.Errorf("Decode skipSpecial = %q", got) // <think> is an added but not special token
	}
	if !q.IsSpecial(imEnd) || q.IsSpecial(think) {
		t.Errorf("IsSpecial(im_end)=%v IsSpecial(think)=%v", q.IsSpecial(imEnd), q.IsSpecial(think))
	}
	plain := q.EncodeWith(text, Options{ParseSpecial: false})
	if slices.Contains(plain, imStart) || !slices.Contains(plain, think) {
		t.Errorf("ParseSpecial=false: %v", plain)
	}
	if got := q.Decode(plain, true); got != text {
		t.Errorf("ParseSpecial=false round trip = %q", got)
	}
	if q.EOS() != imEnd || q.BOS() != -1 || q.VocabSize() != 151669 {
		t.Errorf("EOS %d BOS %d VocabSize %d", q.EOS(), q.BOS(), q.VocabSize())
	}
	if !strings.Contains(q.Info().ChatTemplate, "<|im_start|>") {
		t.Error("Qwen3 chat template missing")
	}
}

func TestAddSpecialAndDecodeSpace(t *testing.T) {
	spm := loadFixture(t, "tokenizers/llama-cpp-vocab/ggml-vocab-llama-spm.gguf")
	ids := spm.Encode("Hello world", true)
	want := []int32{1, 15043, 3186}
	if fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Fatalf("Encode = %v, want %v", ids, want)
	}
	tests := []struct {
		ids  []int32
		skip bool
		want string
	}{
		{ids, true, "Hello world"},
		{ids, false, "<s> Hello world"}, // as HF: only the very first piece loses its space
		{ids[1:], false, "Hello world"},
		{ids[2:], false, "world"},
		{[]int32{1, 13, 15043}, true, "\n Hello"},
	}
	for _, tc := range tests {
		if got := spm.Decode(tc.ids, tc.skip); got != tc.want {
			t.Errorf("Decode(%v, %v) = %q, want %q", tc.ids, tc.skip, got, tc.want)
		}
	}
	if got := string(spm.TokenBytes(15043)); got != " Hello" {
		t.Errorf("TokenBytes(▁Hello) = %q", got)
	}
	if got := string(spm.TokenBytes(13)); got != "\n" {
		t.Errorf("TokenBytes(<0x0A>) = %q", got)
	}
	if got := string(spm.TokenBytes(1)); got != "<s>" || !spm.IsSpecial(1) {
		t.Errorf("TokenBytes(BOS) = %q special=%v", got, spm.IsSpecial(1))
	}
	// After a special token, SPM adds the space prefix again (llama.cpp).
	if got := spm.Encode("<s>Hello", false); fmt.Sprint(got) != "[1 15043]" {
		t.Errorf("Encode(<s>Hello) = %v", got)
	}

	l3 := loadFixture(t, "tokenizers/llama3/tokenizer.json")
	if got := l3.Encode("Hello", true); len(got) != 1 {
		t.Errorf("Llama-3 post_processor is plain ByteLevel, yet Encode added %v", got)
	}
	if l3.BOS() != 128000 || l3.EOS() != 128001 || l3.Info().AddBOS {
		t.Errorf("Llama-3 BOS %d EOS %d AddBOS %v", l3.BOS(), l3.EOS(), l3.Info().AddBOS)
	}
	if got := string(l3.TokenBytes(l3.Encode(" the", false)[0])); got != " the" {
		t.Errorf("TokenBytes(Ġthe) = %q", got)
	}
}

func TestConcurrentEncode(t *testing.T) {
	m := loadFixture(t, "tokenizers/llama3/tokenizer.json")
	texts := make([]string, 8)
	want := make([][]int32, len(texts))
	for i := range texts {
		texts[i] = mixedText(3000, int64(i+10))
		want[i] = m.EncodeWith(texts[i], Options{})
	}
	var wg sync.WaitGroup
	errs := make(chan string, len(texts)*4)
	for g := 0; g < 4; g++ {
		for i := range texts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if got := m.EncodeWith(texts[i], Options{}); !slices.Equal(got, want[i]) {
					errs <- fmt.Sprintf("text %d differs under concurrency", i)
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// TestHeapMatchesNaive checks the heap merge loops against the quadratic
// ones on words longer than naiveLimit.
func TestHeapMatchesNaive(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	bl := loadFixture(t, "tokenizers/llama-cpp-vocab/ggml-vocab-gpt-2.gguf")
	sp := loadFixture(t, "tokenizers/llama2-sentencepiece/tokenizer.bin")
	words := strings.Fields(mixedText(4000, 5))
	for it := 0; it < 20; it++ {
		var b strings.Builder
		for b.Len() < 600 {
			b.WriteString(words[rng.Intn(len(words))])
		}
		w := b.String()
		sc := &scratch{}
		syms := make([]int32, len(w))
		for i := range syms {
			syms[i] = bl.byteTok[w[i]]
		}
		heapRes := slices.Clone(bl.bpeRankHeap(sc, slices.Clone(syms)))
		naive := slices.Clone(syms)
		for len(naive) > 1 { // plain reference loop
			best, bestRank := -1, int32(noRank)
			for i := 0; i+1 < len(naive); i++ {
				if r := bl.rankOf(naive[i], naive[i+1]); r < bestRank {
					best, bestRank = i, r
				}
			}
			if best < 0 {
				break
			}
			naive[best] = bl.merges[pairKey(naive[best], naive[best+1])].id
			naive = slices.Delete(naive, best+1, best+2)
		}
		if !slices.Equal(heapRes, naive) {
			t.Fatalf("rank heap differs on %q", w)
		}
		chunk := []byte(strings.ReplaceAll(w, " ", spaceSym))
		long := sp.bpeScore(sc, chunk, nil) // > naiveLimit symbols: heap
		var short []int32
		for start := 0; start < len(chunk); { // chunked: naive loops
			end := nextSpaceChunk(chunk, start)
			short = sp.bpeScore(sc, chunk[start:end], short)
			start = end
		}
		if !slices.Equal(long, short) {
			t.Fatalf("score heap differs on %q", w)
		}
	}
}

func TestLoadDispatch(t *testing.T) {
	dir := filepath.Dir(testenv.SharedFile(t, "tokenizers/qwen3/tokenizer.json"))
	m, err := Load(dir, "")
	if err != nil || m.VocabSize() != 151669 {
		t.Fatalf("Load(dir): %v", err)
	}
	g := testenv.SharedFile(t, "aidreams260K/aidreams260K-f32.gguf")
	if m, err = Load(g, ""); err != nil || m.VocabSize() != 512 {
		t.Fatalf("Load(gguf): %v", err)
	}
	bin := testenv.SharedFile(t, "aidreams260K/aidreams260K.bin")
	if _, err = Load(bin, ""); err == nil {
		t.Error("Load(llama2.c checkpoint) without tokenizer path succeeded")
	}
	tok := testenv.SharedFile(t, "aidreams260K/tok512.bin")
	if m, err = Load(bin, tok); err != nil || m.VocabSize() != 512 || m.BOS() != 1 || m.EOS() != 2 {
		t.Fatalf("Load(bin, tok512): %v", err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing"), ""); err == nil {
		t.Error("Load(missing) succeeded")
	}
}

// writeTinySPM writes a tiny Llama-2/Mistral-style tokenizer.json (character
// BPE with byte fallback, Prepend+Replace normalizer, template BOS) with its
// tokenizer_config.json and generation_config.json.
func writeTinySPM(t *testing.T) string {
	t.Helper()
	vocab := map[string]int{"<unk>": 0, "<s>": 1, "</s>": 2}
	for b := 0; b < 256; b++ {
		vocab[fmt.Sprintf("<0x%02X>", b)] = 3 + b
	}
	for _, tok := range []string{"▁", "h", "e", "l", "o", "w", "r", "d", "he", "ll", "llo", "hello", "▁hello", "▁w", "or", "▁wor", "ld", "▁world"} {
		vocab[tok] = len(vocab)
	}
	merges := [][2]string{{"h", "e"}, {"l", "l"}, {"ll", "o"}, {"he", "llo"}, {"▁", "hello"}, {"▁", "w"}, {"o", "r"}, {"▁w", "or"}, {"l", "d"}, {"▁wor", "ld"}}
	tj := map[string]any{
		"added_tokens": []map[string]any{
			{"id": 0, "content": "<unk>", "special": true}, {"id": 1, "content": "<s>", "special": true},
			{"id": 2, "content": "</s>", "special": true},
		},
		"normalizer": map[string]any{"type": "Sequence", "normalizers": []any{
			map[string]any{"type": "Prepend", "prepend": "▁"},
			map[string]any{"type": "Replace", "pattern": map[string]any{"String": " "}, "content": "▁"},
		}},
		"pre_tokenizer": nil,
		"post_processor": map[string]any{"type": "TemplateProcessing",
			"single":         []any{map[string]any{"SpecialToken": map[string]any{"id": "<s>", "type_id": 0}}, map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}}},
			"special_tokens": map[string]any{"<s>": map[string]any{"id": "<s>", "ids": []int{1}, "tokens": []string{"<s>"}}},
		},
		"decoder": map[string]any{"type": "Sequence", "decoders": []any{
			map[string]any{"type": "Replace", "pattern": map[string]any{"String": "▁"}, "content": " "},
			map[string]any{"type": "ByteFallback"}, map[string]any{"type": "Fuse"},
			map[string]any{"type": "Strip", "content": " ", "start": 1, "stop": 0},
		}},
		"model": map[string]any{"type": "BPE", "vocab": vocab, "merges": merges, "unk_token": "<unk>", "byte_fallback": true, "fuse_unk": true},
	}
	dir := t.TempDir()
	write := func(name string, v any) {
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("tokenizer.json", tj)
	write("tokenizer_config.json", map[string]any{
		"bos_token": map[string]any{"content": "<s>", "special": true}, "eos_token": "</s>",
		"chat_template": []map[string]string{{"name": "default", "template": "{{ x }}"}, {"name": "tool_use", "template": "{{ y }}"}},
	})
	write("generation_config.json", map[string]any{"eos_token_id": []int{2, 7}, "bos_token_id": 1})
	return dir
}

func TestTinySPMTokenizerJSON(t *testing.T) {
	m, err := LoadDir(writeTinySPM(t))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		text string
		want []int32
	}{
		{"hello world", []int32{1, 271, 276}},
		{"hello\n", []int32{1, 271, 3 + '\n'}},           // byte fallback
		{"hé", []int32{1, 259, 260, 3 + 0xC3, 3 + 0xA9}}, // é as two byte tokens
		{"<s>hello", []int32{1, 1, 271}},                 // special matched, prefix again after it
		{"wo", []int32{1, 272, 263}},                     // "▁w" + "o"
		{"", []int32{1}},
	}
	for _, tc := range tests {
		if got := m.Encode(tc.text, true); fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("Encode(%q) = %v, want %v", tc.text, got, tc.want)
		}
		if got := m.Decode(m.Encode(tc.text, false), false); got != tc.text && tc.text != "<s>hello" {
			t.Errorf("round trip %q = %q", tc.text, got)
		}
	}
	info := m.Info()
	if !info.AddBOS || info.BOSID != 1 || fmt.Sprint(info.EOSIDs) != "[2 7]" || info.ChatTemplate != "{{ x }}" || info.ChatTemplates["tool_use"] != "{{ y }}" {
		t.Errorf("Info = %+v", info)
	}
	if got := m.Decode([]int32{1, 271, 276, 2}, true); got != "hello world" {
		t.Errorf("Decode = %q", got)
	}
	if !utf8.ValidString(m.Decode([]int32{3 + 0xC3}, false)) {
		t.Error("Decode of a cut UTF-8 sequence is not valid UTF-8")
	}
}

func FuzzRoundTrip(f *testing.F) {
	for _, s := range splitCases {
		f.Add(s)
	}
	f.Add(mixedText(300, 9))
	var once sync.Once
	var bl, spm *Model
	f.Fuzz(func(t *testing.T, s string) {
		once.Do(func() {
			bl = loadFixture(t, "tokenizers/llama-cpp-vocab/ggml-vocab-gpt-2.gguf")
			spm = loadFixture(t, "tokenizers/llama-cpp-vocab/ggml-vocab-llama-spm.gguf")
		})
		if bl == nil {
			return
		}
		// Byte-level BPE round-trips any bytes, valid UTF-8 or not.
		if got := bl.AppendDecode(nil, bl.EncodeWith(s, Options{}), false); string(got) != s {
			t.Fatalf("byte-level round trip of %q = %q", s, got)
		}
		ids := spm.Encode(s, true) // hostile input must not panic
		if len(ids) == 0 || ids[0] != spm.BOS() || !utf8.ValidString(s) {
			return
		}
		// SPM: "▁" in the input is indistinguishable from a space.
		if strings.Contains(s, spaceSym) {
			return
		}
		if got := spm.Decode(spm.EncodeWith(s, Options{}), false); got != s {
			t.Fatalf("SPM round trip of %q = %q", s, got)
		}
	})
}

func TestGGUFInfo(t *testing.T) {
	phi := loadFixture(t, "tokenizers/llama-cpp-vocab/ggml-vocab-phi-3.gguf")
	info := phi.Info()
	// EOS from the metadata first, then the end-of-turn tokens llama.cpp
	// also stops on.
	if fmt.Sprint(info.EOSIDs) != "[32000 32007]" || !info.AddBOS || info.BOSID != 1 || !strings.Contains(info.ChatTemplate, "<|assistant|>") {
		t.Errorf("phi-3 Info = %+v", info)
	}
	if id, ok := phi.TokenID("<|end|>"); !ok || id != 32007 || !phi.IsSpecial(id) {
		t.Errorf("TokenID(<|end|>) = %d, %v", id, ok)
	}
	gpt2 := loadFixture(t, "tokenizers/llama-cpp-vocab/ggml-vocab-gpt-2.gguf")
	if info := gpt2.Info(); info.AddBOS || fmt.Sprint(info.EOSIDs) != "[50256]" {
		t.Errorf("gpt-2 Info = %+v", info)
	}
}
