package detok

import (
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/sluice-llm/sluice/internal/testenv"
	"github.com/sluice-llm/sluice/text/tokenizer"
)

// Real tokenizers from ../shared/models, loaded once per test binary.
var (
	realOnce sync.Once
	realToks map[string]tokenizer.Tokenizer
	realErr  error
)

func realTokenizers(t testing.TB) map[string]tokenizer.Tokenizer {
	t.Helper()
	root := testenv.SharedModels(t)
	realOnce.Do(func() {
		realToks = map[string]tokenizer.Tokenizer{}
		for name, load := range map[string]func() (*tokenizer.Model, error){
			"llama3": func() (*tokenizer.Model, error) {
				return tokenizer.LoadDir(filepath.Join(root, "tokenizers", "llama3"))
			},
			"qwen3": func() (*tokenizer.Model, error) { return tokenizer.LoadDir(filepath.Join(root, "tokenizers", "qwen3")) },
			"llama2": func() (*tokenizer.Model, error) {
				return tokenizer.LoadLlama2C(filepath.Join(root, "tokenizers", "llama2-sentencepiece", "tokenizer.bin"))
			},
		} {
			m, err := load()
			if err != nil {
				realErr = err
				return
			}
			realToks[name] = m
		}
	})
	if realErr != nil {
		t.Fatalf("load tokenizers: %v", realErr)
	}
	return realToks
}

var realTexts = []string{
	"Hello, world! The quick brown fox jumps over the lazy dog.",
	" leading space and  double  spaces\nnew line\ttab",
	"Zürich, naïve café, 日本語のテキスト, 한국어, Ελληνικά, emoji 🙂🚀👩‍💻 end.",
	"def f(x):\n    return x ** 2  # comment\n",
	"١٢٣ numbers 12345 and ½ ¾",
}

// TestRealStreamEqualsDecode streams the encoding of real text through
// every tokenizer, in deltas of 1..6 tokens, and compares with Decode.
func TestRealStreamEqualsDecode(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for name, tok := range realTokenizers(t) {
		t.Run(name, func(t *testing.T) {
			for _, text := range realTexts {
				for _, addSpecial := range []bool{false, true} {
					all := tok.Encode(text, addSpecial)
					for _, skip := range []bool{false, true} {
						want := tok.Decode(all, skip)
						for maxPiece := 1; maxPiece <= 6; maxPiece++ {
							if got := streamDecode(tok, Options{SkipSpecial: skip}, all, r, maxPiece); got != want {
								t.Fatalf("%q addSpecial=%v skip=%v maxPiece=%d:\n got %q\nwant %q", text, addSpecial, skip, maxPiece, got, want)
							}
						}
					}
				}
			}
		})
	}
}

// TestRealRandomIDs streams random ids, biased towards tokens that hold
// partial UTF-8 sequences. Where the bytes are well-formed, the result must
// equal Decode; where they are not, it must equal the Hugging Face lossy
// decoding of the same bytes (tokenizer.Decode collapses a run of invalid
// bytes into one U+FFFD, HF replaces each maximal ill-formed subsequence).
func TestRealRandomIDs(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for name, tok := range realTokenizers(t) {
		t.Run(name, func(t *testing.T) {
			var partial []int32
			for id := range int32(tok.VocabSize()) {
				b := tok.TokenBytes(id)
				if len(b) > 0 && completeLen(b) < len(b) || len(b) == 1 && b[0] >= 0x80 {
					partial = append(partial, id)
				}
			}
			if len(partial) == 0 {
				t.Fatalf("no partial-UTF-8 tokens found")
			}
			ad, hasAppend := tok.(interface {
				AppendDecode(dst []byte, ids []int32, skipSpecial bool) []byte
			})
			checked := 0
			for range 400 {
				all := make([]int32, r.IntN(16))
				for i := range all {
					if r.IntN(2) == 0 {
						all[i] = partial[r.IntN(len(partial))]
					} else {
						all[i] = int32(r.IntN(tok.VocabSize()))
					}
				}
				skip := r.IntN(2) == 0
				want := tok.Decode(all, skip)
				if strings.ContainsRune(want, '\uFFFD') {
					if !hasAppend {
						continue
					}
					want = string(appendLossy(nil, ad.AppendDecode(nil, all, skip)))
				}
				checked++
				for maxPiece := 1; maxPiece <= 4; maxPiece++ {
					if got := streamDecode(tok, Options{SkipSpecial: skip}, all, r, maxPiece); got != want {
						t.Fatalf("ids %v skip=%v maxPiece=%d:\n got %q\nwant %q", all, skip, maxPiece, got, want)
					}
				}
			}
			if checked < 100 {
				t.Fatalf("only %d cases checked", checked)
			}
		})
	}
}

// TestRealPromptContinuation: with the prompt given, the streamed output is
// what Decode(prompt+output) adds to Decode(prompt) (the SentencePiece
// leading space of the first output token is kept).
func TestRealPromptContinuation(t *testing.T) {
	for name, tok := range realTokenizers(t) {
		t.Run(name, func(t *testing.T) {
			prompt := tok.Encode("Once upon a time", true)
			out := tok.Encode(" there was a café in Zürich 🙂.", false)
			if name == "llama2" {
				// SentencePiece encodes a text start with a "▁" prefix; take the
				// output ids from encoding the whole sequence instead.
				full := tok.Encode("Once upon a time there was a café in Zürich 🙂.", true)
				out = full[len(prompt):]
			}
			all := append(append([]int32(nil), prompt...), out...)
			for _, skip := range []bool{false, true} {
				p, full := tok.Decode(prompt, skip), tok.Decode(all, skip)
				if !strings.HasPrefix(full, p) {
					t.Fatalf("Decode(prompt) %q is not a prefix of Decode(all) %q", p, full)
				}
				got := streamDecode(tok, Options{SkipSpecial: skip, PromptIDs: prompt}, out, rand.New(rand.NewPCG(1, 1)), 1)
				if want := full[len(p):]; got != want {
					t.Errorf("skip=%v: got %q, want %q", skip, got, want)
				}
			}
		})
	}
}

// TestRealAddAllocations checks that a real tokenizer.Model (a
// TokenStringer) streams one-token Adds of well-formed text without
// allocating: the returned string shares the model's bytes.
func TestRealAddAllocations(t *testing.T) {
	toks := realTokenizers(t)
	for _, name := range []string{"llama3", "llama2"} {
		t.Run(name, func(t *testing.T) {
			tok := toks[name]
			all := tok.Encode(strings.Repeat(realTexts[0]+" ", 4), false)
			d := New(tok, Options{SkipSpecial: true, PromptIDs: all[:4]})
			i := 4
			add := func() {
				d.Add(all[i : i+1])
				if i++; i == len(all) {
					i = 4
				}
			}
			// testing.AllocsPerRun rounds the average down (a copy in 79 %
			// of the calls reads 0): count every allocation of many calls.
			const runs = 2000
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
			add() // warm up
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			for range runs {
				add()
			}
			runtime.ReadMemStats(&m1)
			if n := m1.Mallocs - m0.Mallocs; n > runs/100 {
				t.Errorf("%d allocations in %d one-token Adds, want about 0", n, runs)
			}
		})
	}
}

// BenchmarkAddReal measures one-token Adds with the real Llama-3 and
// Llama-2 tokenizers over an encoded mixed-language text.
func BenchmarkAddReal(b *testing.B) {
	toks := realTokenizers(b)
	text := strings.Repeat(strings.Join(realTexts, " "), 4)
	for _, name := range []string{"llama3", "llama2"} {
		tok := toks[name]
		b.Run(name, func(b *testing.B) {
			all := tok.Encode(text, false)
			d := New(tok, Options{SkipSpecial: true, PromptIDs: all[:8]})
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				d.Add(all[i : i+1])
				i++
				if i == len(all) {
					i = 0
				}
			}
		})
	}
}
