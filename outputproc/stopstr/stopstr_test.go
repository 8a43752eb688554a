package stopstr

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
)

// naive is the reference: scan end positions left to right and report the
// first stop string (in list order) ending there.
func naive(text string, stops []string, include bool) (string, string) {
	for e := 1; e <= len(text); e++ {
		for _, s := range stops {
			if s != "" && strings.HasSuffix(text[:e], s) {
				if include {
					return text[:e], s
				}
				return text[:e-len(s)], s
			}
		}
	}
	return text, ""
}

// stream feeds deltas and returns the concatenated output and the match.
func stream(t testing.TB, deltas []string, stops []string, include bool) (string, string) {
	t.Helper()
	m := New(stops, include)
	var sb strings.Builder
	var got string
	for _, d := range deltas {
		emit, stopped, matched := m.Add(d)
		sb.WriteString(emit)
		if stopped {
			if got != "" && got != matched {
				t.Fatalf("matched changed from %q to %q", got, matched)
			}
			got = matched
		}
	}
	sb.WriteString(m.Flush())
	return sb.String(), got
}

func TestMatcherTable(t *testing.T) {
	tests := []struct {
		name    string
		stops   []string
		include bool
		deltas  []string
		want    string
		matched string
	}{
		{"no stops", nil, false, []string{"hello", " world"}, "hello world", ""},
		{"simple", []string{"STOP"}, false, []string{"abc", "STOP", "def"}, "abc", "STOP"},
		{"split across deltas", []string{"STOP"}, false, []string{"abcS", "T", "OPdef"}, "abc", "STOP"},
		{"include", []string{"STOP"}, true, []string{"abcS", "T", "OPdef"}, "abcSTOP", "STOP"},
		{"false prefix released", []string{"STOP"}, false, []string{"abcST", "x"}, "abcSTx", ""},
		{"held tail flushed", []string{"STOP"}, false, []string{"abcST"}, "abcST", ""},
		{"earliest end wins", []string{"long stop", "ng"}, false, []string{"a long stop"}, "a lo", "ng"},
		{"tie goes to first listed", []string{"b", "ab"}, false, []string{"xab"}, "xa", "b"},
		{"tie goes to first listed 2", []string{"ab", "b"}, false, []string{"xab"}, "x", "ab"},
		{"unicode", []string{"終わり"}, false, []string{"これで終", "わりです"}, "これで", "終わり"},
		{"empty stop ignored", []string{""}, false, []string{"abc"}, "abc", ""},
		{"overlapping prefix", []string{"aab"}, false, []string{"a", "a", "a", "b", "c"}, "a", "aab"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, matched := stream(t, tc.deltas, tc.stops, tc.include)
			if got != tc.want || matched != tc.matched {
				t.Errorf("got (%q, %q), want (%q, %q)", got, matched, tc.want, tc.matched)
			}
			full := strings.Join(tc.deltas, "")
			if a, am := Apply(full, tc.stops, tc.include); a != tc.want || am != tc.matched {
				t.Errorf("Apply = (%q, %q), want (%q, %q)", a, am, tc.want, tc.matched)
			}
		})
	}
}

func TestHoldsOnlyStopPrefix(t *testing.T) {
	m := New([]string{"</s>", "###"}, false)
	if emit, _, _ := m.Add("hello <"); emit != "hello " {
		t.Fatalf("emit = %q, want %q (only '<' held)", emit, "hello ")
	}
	if emit, _, _ := m.Add("b>"); emit != "<b>" {
		t.Fatalf("emit = %q, want %q", emit, "<b>")
	}
	if emit, _, _ := m.Add("x#"); emit != "x" {
		t.Fatalf("emit = %q, want %q", emit, "x")
	}
	if emit, stopped, matched := m.Add("##tail"); emit != "" || !stopped || matched != "###" {
		t.Fatalf("got (%q, %v, %q)", emit, stopped, matched)
	}
	if emit, stopped, _ := m.Add("more"); emit != "" || !stopped {
		t.Fatalf("after stop got (%q, %v)", emit, stopped)
	}
	if f := m.Flush(); f != "" {
		t.Fatalf("Flush after stop = %q", f)
	}
}

func TestPass(t *testing.T) {
	m := New([]string{"END"}, false)
	if e, _, _ := m.Add("xE"); e != "x" {
		t.Fatalf("got %q", e)
	}
	if e := m.Pass("ND"); e != "END" {
		t.Fatalf("Pass = %q, want held text plus passed text", e)
	}
	if e, stopped, _ := m.Add("yEND"); e != "y" || !stopped {
		t.Fatalf("got (%q, %v)", e, stopped)
	}
}

// randText draws from a tiny alphabet so stop strings occur often.
func randText(r *rand.Rand, n int, alphabet []string) string {
	var sb strings.Builder
	for range n {
		sb.WriteString(alphabet[r.IntN(len(alphabet))])
	}
	return sb.String()
}

// splits returns text cut into deltas of random sizes (byte-wise on rune
// boundaries).
func splitRunes(r *rand.Rand, text string, maxPiece int) []string {
	runes := []rune(text)
	var out []string
	for i := 0; i < len(runes); {
		n := 1 + r.IntN(maxPiece)
		j := min(len(runes), i+n)
		out = append(out, string(runes[i:j]))
		i = j
	}
	return out
}

func TestStreamEqualsNonStreamed(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "b", "c", "é", "<", "/", ">", " "}
	for iter := range 3000 {
		text := randText(r, r.IntN(40), alphabet)
		stops := make([]string, 1+r.IntN(6))
		for i := range stops {
			stops[i] = randText(r, 1+r.IntN(4), alphabet)
		}
		include := r.IntN(2) == 0
		want, wantM := naive(text, stops, include)
		if a, am := Apply(text, stops, include); a != want || am != wantM {
			t.Fatalf("iter %d: Apply(%q, %q) = (%q, %q), want (%q, %q)", iter, text, stops, a, am, want, wantM)
		}
		// Every split into deltas of 1..N runes.
		for maxPiece := 1; maxPiece <= 6; maxPiece++ {
			deltas := splitRunes(r, text, maxPiece)
			got, gotM := stream(t, deltas, stops, include)
			if got != want || gotM != wantM {
				t.Fatalf("iter %d: stops %q include %v deltas %q: got (%q, %q), want (%q, %q)",
					iter, stops, include, deltas, got, gotM, want, wantM)
			}
		}
	}
}

// TestEveryTwoWaySplit checks all two- and three-way byte splits of a few
// fixed texts, including splits inside multi-byte runes.
func TestEverySplit(t *testing.T) {
	cases := []struct {
		text  string
		stops []string
	}{
		{"hello wor<|end|>ld", []string{"<|end|>", "wor<x"}},
		{"ééé終わりabc", []string{"終わり", "éé終"}},
		{"aaaaab", []string{"aab", "aaab"}},
	}
	for _, tc := range cases {
		for _, include := range []bool{false, true} {
			want, wantM := naive(tc.text, tc.stops, include)
			for i := 0; i <= len(tc.text); i++ {
				for j := i; j <= len(tc.text); j++ {
					deltas := []string{tc.text[:i], tc.text[i:j], tc.text[j:]}
					got, gotM := stream(t, deltas, tc.stops, include)
					if got != want || gotM != wantM {
						t.Fatalf("%q split %d,%d include %v: got (%q, %q), want (%q, %q)", tc.text, i, j, include, got, gotM, want, wantM)
					}
				}
			}
		}
	}
}

func FuzzMatcher(f *testing.F) {
	f.Add("hello STOP world", "STOP", "xx", uint8(3), false)
	f.Add("ééé終わり", "終わり", "é", uint8(1), true)
	f.Fuzz(func(t *testing.T, text, s1, s2 string, piece uint8, include bool) {
		stops := []string{s1, s2}
		want, wantM := naive(text, stops, include)
		n := int(piece%8) + 1
		var deltas []string
		for i := 0; i < len(text); i += n {
			deltas = append(deltas, text[i:min(len(text), i+n)])
		}
		got, gotM := stream(t, deltas, stops, include)
		if got != want || gotM != wantM {
			t.Fatalf("got (%q, %q), want (%q, %q)", got, gotM, want, wantM)
		}
	})
}

// BenchmarkAdd feeds token-sized deltas (about 4 bytes) through a matcher
// with two stop strings, some deltas starting a false prefix.
func BenchmarkAdd(b *testing.B) {
	words := []string{" the", " cat", " sat", " on", " <", "|e", "nd", " mat", ".", " #", "#"}
	for _, include := range []bool{false, true} {
		name := "exclude"
		if include {
			name = "include"
		}
		b.Run(name, func(b *testing.B) {
			m := New([]string{"<|end|>", "###"}, include)
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				m.Add(words[i])
				i++
				if i == len(words) {
					i = 0
				}
			}
		})
	}
}

// BenchmarkManyStops feeds token-sized deltas through a matcher with many
// distinct stop strings (the hostile request of issue 21 had 100 000); the
// cost per Add must not grow with their number.
//
//	go test -run '^$' -bench ManyStops ./outputproc/stopstr
func BenchmarkManyStops(b *testing.B) {
	words := []string{" the", " cat", " sat", " on", " <", "|e", "nd", " mat", ".", " #", "#"}
	for _, n := range []int{4, 1000, 100000} {
		r := rand.New(rand.NewPCG(7, uint64(n)))
		stops := make([]string, n)
		for i := range stops {
			// "<|" starts a false prefix in the text; the rest never matches.
			stops[i] = "<|" + randText(r, 2+r.IntN(8), []string{"x", "y", "q", "k"})
		}
		b.Run(fmt.Sprintf("stops=%d", n), func(b *testing.B) {
			m := New(stops, false)
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				if _, stopped, _ := m.Add(words[i]); stopped {
					b.Fatal("unexpected stop")
				}
				i++
				if i == len(words) {
					i = 0
				}
			}
		})
	}
}

// TestSharedSet: Matchers of one compiled Set (a request's choices) run
// concurrently and independently, each equal to the reference.
func TestSharedSet(t *testing.T) {
	stops := []string{"<|end|>", "###", "ab", "b<"}
	set := Compile(stops)
	texts := []string{"xxab", "x<|end|>y", "##a#b<z", "no match here", "a###", "<|en", "b"}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for _, text := range texts {
				include := g%2 == 0
				m := set.Matcher(include)
				var sb strings.Builder
				var got string
				for i := 0; i < len(text); i++ {
					emit, stopped, matched := m.Add(text[i : i+1])
					sb.WriteString(emit)
					if stopped {
						got = matched
						break
					}
				}
				sb.WriteString(m.Flush())
				want, wantM := naive(text, stops, include)
				if sb.String() != want || got != wantM {
					t.Errorf("goroutine %d %q: got (%q, %q), want (%q, %q)", g, text, sb.String(), got, want, wantM)
				}
			}
		}(g)
	}
	wg.Wait()
}
