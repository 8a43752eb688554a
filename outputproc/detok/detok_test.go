package detok

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/sluice-llm/sluice/text/tokenizer"
)

func ids(f *fakeTok, pieces ...string) []int32 {
	out := make([]int32, len(pieces))
	for i, p := range pieces {
		id, ok := f.TokenID(p)
		if !ok {
			panic("no piece " + p)
		}
		out[i] = id
	}
	return out
}

func TestDecoderDeltas(t *testing.T) {
	bl, spm := newByteLevelFake(), newSPMFake()
	tests := []struct {
		name   string
		tok    *fakeTok
		opts   Options
		steps  [][]string // pieces fed per Add
		want   []string   // delta per Add
		flush  string
		prompt []string
	}{
		{
			name:  "byte-level split euro",
			tok:   bl,
			steps: [][]string{{"Hello"}, {"\xE2\x82"}, {"\xAC!"}},
			want:  []string{"Hello", "", "€!"},
		},
		{
			name:  "byte-level emoji over two tokens then flush",
			tok:   bl,
			steps: [][]string{{" cat"}, {"\xF0\x9F"}},
			want:  []string{" cat", ""},
			flush: "\uFFFD",
		},
		{
			name:  "spm byte fallback run",
			tok:   spm,
			steps: [][]string{{"▁Hello"}, {"<0xE2>"}, {"<0x82>"}, {"<0xAC>"}, {"▁world"}},
			want:  []string{"Hello", "", "", "€", " world"},
		},
		{
			name:   "spm continues prompt keeps space",
			tok:    spm,
			prompt: []string{"<s>", "▁the"},
			steps:  [][]string{{"▁Hello"}, {"."}},
			want:   []string{" Hello", "."},
		},
		{
			name:   "spm prompt of only BOS still strips",
			tok:    spm,
			opts:   Options{SkipSpecial: true},
			prompt: []string{"<s>"},
			steps:  [][]string{{"▁Hello"}},
			want:   []string{"Hello"},
		},
		{
			name:  "spm special not skipped",
			tok:   spm,
			steps: [][]string{{"<s>"}, {"▁Hello"}, {"</s>"}},
			want:  []string{"<s>", " Hello", "</s>"},
		},
		{
			name:  "spm special skipped",
			tok:   spm,
			opts:  Options{SkipSpecial: true},
			steps: [][]string{{"<s>"}, {"▁Hello"}, {"</s>"}},
			want:  []string{"", "Hello", ""},
		},
		{
			name:  "invalid byte emitted at once",
			tok:   spm,
			steps: [][]string{{"ab"}, {"<0xFF>"}, {"<0xE2>", "ab"}},
			want:  []string{"ab", "\uFFFD", "\uFFFDab"},
		},
		{
			name:   "prompt leaves a sequence open",
			tok:    spm,
			prompt: []string{"▁the", "<0xE2>", "<0x82>"},
			steps:  [][]string{{"<0xAC>"}},
			want:   []string{"€"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			if tc.prompt != nil {
				opts.PromptIDs = ids(tc.tok, tc.prompt...)
			}
			d := New(tc.tok, opts)
			for i, step := range tc.steps {
				if got := d.Add(ids(tc.tok, step...)); got != tc.want[i] {
					t.Errorf("step %d Add(%q) = %q, want %q", i, step, got, tc.want[i])
				}
			}
			if got := d.Flush(); got != tc.flush {
				t.Errorf("Flush = %q, want %q", got, tc.flush)
			}
		})
	}
}

func TestLossyMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	interesting := []byte{0x00, 0x41, 0x7F, 0x80, 0x9F, 0xA0, 0xBF, 0xC0, 0xC2, 0xDF, 0xE0, 0xE2, 0xED, 0xEF, 0xF0, 0xF4, 0xF5, 0xFF, 0x82, 0xAC}
	for range 20000 {
		b := make([]byte, r.IntN(8))
		for i := range b {
			b[i] = interesting[r.IntN(len(interesting))]
		}
		got := string(appendLossy(nil, b))
		want := string(appendLossyRef(b))
		if got != want {
			t.Fatalf("appendLossy(% x) = %q, want %q", b, got, want)
		}
		// Splitting at completeLen never changes the decoding.
		n := completeLen(b)
		if split := string(appendLossy(appendLossy(nil, b[:n]), b[n:])); split != want {
			t.Fatalf("split at %d of % x: %q, want %q", n, b, split, want)
		}
	}
}

// randomIDs draws ids biased towards partial UTF-8 bytes, words and
// special tokens.
func randomIDs(r *rand.Rand, f *fakeTok, n int) []int32 {
	var interesting []int32
	for i, b := range f.bytes {
		if len(b) != 1 || b[0] >= 0x80 || b[0] == ' ' || b[0] == 'a' {
			interesting = append(interesting, int32(i))
		}
	}
	out := make([]int32, n)
	for i := range out {
		if r.IntN(3) == 0 {
			out[i] = int32(r.IntN(len(f.bytes)))
		} else {
			out[i] = interesting[r.IntN(len(interesting))]
		}
	}
	return out
}

// streamDecode feeds ids in deltas of 1..maxPiece tokens and returns the
// concatenated text including Flush.
func streamDecode(tok tokenizer.Tokenizer, opts Options, all []int32, r *rand.Rand, maxPiece int) string {
	d := New(tok, opts)
	var sb strings.Builder
	for i := 0; i < len(all); {
		j := min(len(all), i+1+r.IntN(maxPiece))
		sb.WriteString(d.Add(all[i:j]))
		i = j
	}
	sb.WriteString(d.Flush())
	return sb.String()
}

func TestStreamEqualsDecode(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, f := range []*fakeTok{newByteLevelFake(), newSPMFake()} {
		for iter := range 2000 {
			all := randomIDs(r, f, r.IntN(24))
			for _, skip := range []bool{false, true} {
				want := f.Decode(all, skip)
				for maxPiece := 1; maxPiece <= 5; maxPiece++ {
					got := streamDecode(f, Options{SkipSpecial: skip}, all, r, maxPiece)
					if got != want {
						t.Fatalf("spm=%v iter %d skip=%v ids %v (maxPiece %d): got %q, want %q", f.spm, iter, skip, all, maxPiece, got, want)
					}
				}
			}
		}
	}
}

// TestStreamContinuesPrompt checks that with PromptIDs the deltas are the
// text Decode(prompt+output) adds to Decode(prompt), for prompts that end on
// a complete character.
func TestStreamContinuesPrompt(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, f := range []*fakeTok{newByteLevelFake(), newSPMFake()} {
		tested := 0
		for range 3000 {
			prompt := randomIDs(r, f, 1+r.IntN(6))
			out := randomIDs(r, f, r.IntN(12))
			skip := r.IntN(2) == 0
			p := f.Decode(prompt, skip)
			if p == "" || strings.HasSuffix(p, "\uFFFD") {
				continue // prompt with no text, or ending mid-character
			}
			full := f.Decode(append(append([]int32(nil), prompt...), out...), skip)
			if !strings.HasPrefix(full, p) {
				continue
			}
			tested++
			got := streamDecode(f, Options{SkipSpecial: skip, PromptIDs: prompt}, out, r, 3)
			if want := full[len(p):]; got != want {
				t.Fatalf("spm=%v prompt %v out %v skip %v: got %q, want %q", f.spm, prompt, out, skip, got, want)
			}
		}
		if tested < 500 {
			t.Fatalf("only %d prompt cases tested", tested)
		}
	}
}

func TestAddAllocations(t *testing.T) {
	f := newByteLevelFake()
	d := New(f, Options{PromptIDs: ids(f, "Hello")})
	tokIDs := ids(f, " the", " cat", "\xE2\x82", "\xAC!", " world")
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		d.Add(tokIDs[i : i+1])
		i = (i + 1) % len(tokIDs)
	})
	// Only the returned string may allocate.
	if allocs > 1 {
		t.Fatalf("Add allocates %.1f times per token, want <= 1", allocs)
	}
}

// sharedTok is a fake tokenizer that is also a TokenStringer.
type sharedTok struct{ *fakeTok }

// TokenString implements TokenStringer (with a copy: the fake's bytes are
// not shared).
func (s sharedTok) TokenString(id int32) string { return string(s.TokenBytes(id)) }

// TestTokenStringerSameText streams random ids (complete, split and invalid
// UTF-8 pieces, specials) through a tokenizer with and without
// TokenStringer: the same text either way, equal to Decode.
func TestTokenStringerSameText(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, f := range []*fakeTok{newByteLevelFake(), newSPMFake()} {
		for iter := range 1000 {
			all := randomIDs(r, f, r.IntN(24))
			for _, skip := range []bool{false, true} {
				want := f.Decode(all, skip)
				for _, maxPiece := range []int{1, 3} {
					seed := uint64(iter*8 + maxPiece)
					plain := streamDecode(f, Options{SkipSpecial: skip}, all, rand.New(rand.NewPCG(seed, 1)), maxPiece)
					shared := streamDecode(sharedTok{f}, Options{SkipSpecial: skip}, all, rand.New(rand.NewPCG(seed, 1)), maxPiece)
					if plain != want || shared != want {
						t.Fatalf("spm=%v ids %v skip=%v maxPiece %d: plain %q, shared %q, want %q", f.spm, all, skip, maxPiece, plain, shared, want)
					}
				}
			}
		}
	}
}

// TestNewAllocations bounds a Decoder's set-up: the Decoder alone (the
// prompt tail is read in place); its buffers wait for their first use.
func TestNewAllocations(t *testing.T) {
	f := newByteLevelFake()
	for _, tc := range []struct {
		name   string
		prompt []int32
		max    float64
	}{
		{"no prompt", nil, 1},
		{"prompt", ids(f, "Hello", " world"), 1},
		{"prompt open", ids(f, "Hello", "\xE2\x82"), 2}, // and pending
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := testing.AllocsPerRun(100, func() { _ = New(f, Options{PromptIDs: tc.prompt}) }); got > tc.max {
				t.Errorf("New allocates %.0f times, want at most %.0f", got, tc.max)
			}
		})
	}
}

func TestDetokenizableIDs(t *testing.T) {
	all := []int32{5, 6, 2}
	if got := DetokenizableIDs(all, true, false); len(got) != 2 {
		t.Errorf("stop token not dropped: %v", got)
	}
	if got := DetokenizableIDs(all, true, true); len(got) != 3 {
		t.Errorf("include_stop_str_in_output must keep the stop token: %v", got)
	}
	if got := DetokenizableIDs(all, false, false); len(got) != 3 {
		t.Errorf("not finished by a stop token: %v", got)
	}
}

// FuzzDecoder checks streaming against one-shot Decode on arbitrary ids.
func FuzzDecoder(f *testing.F) {
	f.Add([]byte{1, 2, 3, 200, 201}, uint8(2), false, true)
	f.Add([]byte{0xE2, 0x82, 0xAC}, uint8(1), true, false)
	bl, spm := newByteLevelFake(), newSPMFake()
	f.Fuzz(func(t *testing.T, raw []byte, piece uint8, skip, useSPM bool) {
		tok := bl
		if useSPM {
			tok = spm
		}
		all := make([]int32, len(raw))
		for i, b := range raw {
			all[i] = int32(int(b) * len(tok.bytes) / 256)
		}
		want := tok.Decode(all, skip)
		var tk tokenizer.Tokenizer = tok
		if piece&0x80 != 0 {
			tk = sharedTok{tok} // the TokenStringer path
		}
		got := streamDecode(tk, Options{SkipSpecial: skip}, all, rand.New(rand.NewPCG(uint64(piece), 1)), int(piece%6)+1)
		if got != want {
			t.Fatalf("ids %v: got %q, want %q", all, got, want)
		}
	})
}

// BenchmarkAdd measures one-token Adds in steady state over a mix of whole
// words and split multi-byte characters.
func BenchmarkAdd(b *testing.B) {
	f := newByteLevelFake()
	tokIDs := ids(f, " the", " cat", "Hello", " world", "\xE2\x82", "\xAC!", "日本", " é")
	d := New(f, Options{PromptIDs: ids(f, "Hello")})
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		d.Add(tokIDs[i : i+1])
		i++
		if i == len(tokIDs) {
			i = 0
		}
	}
}

// TestEverySplit enumerates every way to cut short id sequences into
// deltas (all 2^(n-1) compositions) and requires the same text each time.
func TestEverySplit(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, f := range []*fakeTok{newByteLevelFake(), newSPMFake()} {
		for range 150 {
			all := randomIDs(r, f, 1+r.IntN(8))
			skip := r.IntN(2) == 0
			want := f.Decode(all, skip)
			n := len(all)
			for mask := range 1 << (n - 1) {
				d := New(f, Options{SkipSpecial: skip})
				var sb strings.Builder
				start := 0
				for i := 1; i <= n; i++ {
					if i == n || mask&(1<<(i-1)) != 0 {
						sb.WriteString(d.Add(all[start:i]))
						start = i
					}
				}
				sb.WriteString(d.Flush())
				if got := sb.String(); got != want {
					t.Fatalf("spm=%v ids %v skip=%v cut mask %b: got %q, want %q", f.spm, all, skip, mask, got, want)
				}
			}
		}
	}
}

// primePromptRef is primePrompt as first written (the whole tail, built
// by prepending), the definition the in-place version must match.
func primePromptRef(d *Decoder, prompt []int32) {
	var tail []byte
	for i := len(prompt) - 1; i >= 0 && len(tail) < 4; i-- {
		id := prompt[i]
		if d.skip && d.tok.IsSpecial(id) {
			continue
		}
		b := d.tok.TokenBytes(id)
		if len(b) == 0 {
			continue
		}
		d.atStart = false
		tail = append(append([]byte(nil), b...), tail...)
	}
	if n := completeLen(tail); n < len(tail) {
		d.pending = append(d.pending, tail[n:]...)
	}
}

// FuzzPrimePrompt checks primePrompt (the prompt tail's last 4 bytes)
// against primePromptRef (the whole tail): the same pending bytes and
// start state, on both fakes, with and without skipping special tokens.
func FuzzPrimePrompt(f *testing.F) {
	f.Add([]byte{0xE2, 0x82}, false, false)
	f.Add([]byte{3, 200, 255, 1, 0}, true, true)
	f.Add([]byte{0xF0, 0x9F, 0x98, 0x80, 0xC3}, false, true)
	bl, spm := newByteLevelFake(), newSPMFake()
	f.Fuzz(func(t *testing.T, raw []byte, skip, useSPM bool) {
		tok := bl
		if useSPM {
			tok = spm
		}
		prompt := make([]int32, len(raw))
		for i, b := range raw {
			prompt[i] = int32(int(b) * len(tok.bytes) / 256)
		}
		got := &Decoder{tok: tok, skip: skip, atStart: true}
		got.primePrompt(prompt)
		want := &Decoder{tok: tok, skip: skip, atStart: true}
		primePromptRef(want, prompt)
		if string(got.pending) != string(want.pending) || got.atStart != want.atStart {
			t.Fatalf("prompt %v skip=%v spm=%v: pending %q start %v, want %q %v", prompt, skip, useSPM,
				got.pending, got.atStart, want.pending, want.atStart)
		}
	})
}
