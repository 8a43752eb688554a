package tagscan

import "testing"

func TestPartialSuffix(t *testing.T) {
	for _, tc := range []struct {
		s    string
		tags []string
		want int
	}{
		{"hello <thi", []string{"<think>"}, 4},
		{"hello <think>", []string{"<think>"}, 0}, // a whole tag is not a proper prefix
		{"hello <", []string{"</think>", "<tool_call>"}, 1},
		{"abc </", []string{"</think>", "<tool_call>"}, 2},
		{"abc", []string{""}, 0},
		{"", []string{"<a>"}, 0},
		{"<tool_c", []string{"<t", "<tool_call>"}, 7},
		{"xx<", []string{"<<a"}, 1},
		{"x<<", []string{"<<a"}, 2},
	} {
		if got := PartialSuffix([]byte(tc.s), tc.tags...); got != tc.want {
			t.Errorf("PartialSuffix(%q, %q) = %d, want %d", tc.s, tc.tags, got, tc.want)
		}
	}
}

func TestIsSpace(t *testing.T) {
	for c := 0; c < 256; c++ {
		want := c == ' ' || c == '\n' || c == '\t' || c == '\r'
		if IsSpace(byte(c)) != want {
			t.Errorf("IsSpace(%q) = %v", byte(c), !want)
		}
	}
}

// FuzzPartialSuffix checks the result against the definition: the longest
// suffix of s that is a proper prefix of a tag.
func FuzzPartialSuffix(f *testing.F) {
	f.Add([]byte("abc <thi"), "<think>", "</think>")
	f.Fuzz(func(t *testing.T, s []byte, a, b string) {
		got := PartialSuffix(s, a, b)
		want := 0
		for _, tag := range []string{a, b} {
			for n := 1; n < len(tag) && n <= len(s); n++ {
				if string(s[len(s)-n:]) == tag[:n] && n > want {
					want = n
				}
			}
		}
		if got != want {
			t.Fatalf("PartialSuffix(%q, %q, %q) = %d, want %d", s, a, b, got, want)
		}
	})
}
