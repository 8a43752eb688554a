package openai

import (
	"encoding/json"
	"flag"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", "quote\" back\\slash", "\x00\x01\x1f\x7f", "tab\tnl\ncr\r", "ünï ✓ 😀", "\xff\xfe", "a\u2028b\u2029c", "<>&"} {
		checkString(t, s)
	}
}

func checkString(t *testing.T, s string) {
	t.Helper()
	got := AppendString(nil, s)
	var back string
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatalf("AppendString(%q) = %s: invalid JSON: %v", s, got, err)
	}
	want, _ := json.Marshal(s)
	var wantBack string
	_ = json.Unmarshal(want, &wantBack)
	if back != wantBack {
		t.Fatalf("AppendString(%q) decodes to %q, encoding/json gives %q", s, back, wantBack)
	}
}

// FuzzAppendString checks that AppendString always yields valid JSON that
// decodes to what encoding/json's encoding decodes to.
func FuzzAppendString(f *testing.F) {
	f.Add("hello \"world\"\n")
	f.Add("\xed\xa0\x80 surrogate")
	f.Fuzz(func(t *testing.T, s string) { checkString(t, s) })
}

func TestAppendFloat(t *testing.T) {
	cases := map[float64]string{-1: "-1.0", 0: "0.0", -0.25: "-0.25", -1e-7: "-1e-07"}
	for f, want := range cases {
		if got := string(AppendFloat(nil, f, 32)); got != want {
			t.Errorf("AppendFloat(%v) = %s, want %s", f, got, want)
		}
	}
}

// TestAppendBytesString: the byte-slice form writes what the string form
// does, without allocating for token-sized input.
func TestAppendBytesString(t *testing.T) {
	dst := make([]byte, 0, 256)
	for _, s := range []string{"", "plain", "quote\" back\\slash", "\x00\x1f", "ünï ✓ 😀", "\xff\xfe", "a\u2028b", "\xe2\x82"} {
		want := AppendString(nil, s)
		b := []byte(s)
		if got := AppendBytesString(dst[:0], b); string(got) != string(want) {
			t.Errorf("AppendBytesString(%q) = %s, want %s", s, got, want)
		}
		if n := testing.AllocsPerRun(100, func() { dst = AppendBytesString(dst[:0], b) }); n != 0 {
			t.Errorf("AppendBytesString(%q) allocates %v times", s, n)
		}
	}
}
