package constraint

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sluice-llm/sluice/ipc"
)

// TestWhitespaceModes: each JSON whitespace mode accepts exactly the
// whitespace it documents, for a schema and for json_object alike.
func TestWhitespaceModes(t *testing.T) {
	const schema = `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"array","items":{"type":"boolean"}}},"required":["a","b"]}`
	indent20 := "\n" + strings.Repeat(" ", 20)
	cases := []struct {
		name string
		text string
		// want is the verdict for bounded, compact and any.
		want [3]bool
	}{
		{"compact", `{"a":1,"b":[true,false]}`, [3]bool{true, true, true}},
		{"single spaces", `{ "a": 1, "b": [ true ] }`, [3]bool{true, true, true}},
		{"pretty printed", "{\n  \"a\": 1,\n  \"b\": [\n    true\n  ]\n}", [3]bool{true, false, true}},
		{"tab indent", "{\n\t\"a\": 1,\n\t\"b\": []\n}", [3]bool{true, false, true}},
		{"newline and 20 spaces", "{" + indent20 + `"a":1,"b":[]}`, [3]bool{true, false, false}}, // any: 20 bytes at most
		{"newline and 21 spaces", "{" + indent20 + ` "a":1,"b":[]}`, [3]bool{false, false, false}},
		{"leading space", ` {"a":1,"b":[]}`, [3]bool{false, false, true}},
		{"leading newline", "\n{\"a\":1,\"b\":[]}", [3]bool{false, false, true}},
		{"two spaces", `{"a":  1,"b":[]}`, [3]bool{false, false, true}},
		{"two newlines", "{\n\n\"a\":1,\"b\":[]}", [3]bool{false, false, true}},
		{"space then newline", "{ \n\"a\":1,\"b\":[]}", [3]bool{false, false, true}},
		{"carriage return", "{\r\n\"a\":1,\"b\":[]}", [3]bool{false, false, false}},
		{"newline before colon", "{\"a\"\n:1,\"b\":[]}", [3]bool{false, false, true}},
		{"newline after colon", "{\"a\":\n1,\"b\":[]}", [3]bool{false, false, true}},
		{"newline before comma", "{\"a\":1\n,\"b\":[]}", [3]bool{false, false, true}},
		{"space before colon and comma", `{"a" : 1 ,"b" : []}`, [3]bool{true, true, true}},
	}
	modes := []Whitespace{WhitespaceBounded, WhitespaceCompact, WhitespaceAny}
	for i, w := range modes {
		sc, err := JSONSchemaWhitespace(json.RawMessage(schema), true, w)
		if err != nil {
			t.Fatal(err)
		}
		oc := JSONObjectWhitespace(w)
		wantKind := map[Whitespace]string{WhitespaceBounded: "json_schema", WhitespaceCompact: "json_schema+compact", WhitespaceAny: "json_schema+any"}[w]
		if sc.Kind != wantKind || !IsJSON(sc.Kind) || !IsJSON(oc.Kind) {
			t.Fatalf("%s: kinds %q %q", w, sc.Kind, oc.Kind)
		}
		sg, err := Compile(sc)
		if err != nil {
			t.Fatal(err)
		}
		og, err := Compile(oc)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range cases {
			if got := irMatches(sg, sg.Start, tc.text); got != tc.want[i] {
				t.Errorf("%s schema: %s %q: accepted %v, want %v", w, tc.name, tc.text, got, tc.want[i])
			}
			if got := irMatches(og, og.Start, tc.text); got != tc.want[i] {
				t.Errorf("%s json_object: %s %q: accepted %v, want %v", w, tc.name, tc.text, got, tc.want[i])
			}
		}
	}
	// Equal schemas in different modes are different cache entries.
	a, _ := JSONSchemaWhitespace(json.RawMessage(schema), true, WhitespaceBounded)
	b, _ := JSONSchemaWhitespace(json.RawMessage(schema), true, WhitespaceAny)
	if a.Hash == b.Hash || JSONObject().Hash == JSONObjectWhitespace(WhitespaceCompact).Hash {
		t.Error("whitespace mode must be part of the hash")
	}
}

// TestWhitespaceKinds: mode names parse, and malformed kinds are errors.
func TestWhitespaceKinds(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Whitespace
		ok   bool
	}{{"", WhitespaceBounded, true}, {"bounded", WhitespaceBounded, true}, {"compact", WhitespaceCompact, true}, {"any", WhitespaceAny, true}, {"loose", 0, false}, {"Compact", 0, false}} {
		w, err := ParseWhitespace(tc.in)
		if (err == nil) != tc.ok || (tc.ok && w != tc.want) {
			t.Errorf("ParseWhitespace(%q) = %v, %v", tc.in, w, err)
		}
		if tc.ok && w.String() != tc.in && tc.in != "" {
			t.Errorf("%v.String() = %q", w, w.String())
		}
	}
	for _, kind := range []string{"json_schema+bounded", "json_schema+", "regex+compact", "json_object+loose", "grammar+any"} {
		if _, err := Compile(ipc.Constraint{Kind: kind, Spec: `{"type":"integer"}`}); err == nil {
			t.Errorf("kind %q compiled", kind)
		}
	}
}

// FuzzWhitespaceKind: any kind string is either compiled or refused,
// never a panic.
func FuzzWhitespaceKind(f *testing.F) {
	for _, s := range []string{"json_schema", "json_schema+compact", "json_object+any", "json_schema+", "+", "regex+any"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, kind string) {
		base, w, err := splitKind(kind)
		if err != nil {
			return
		}
		if base != kind && jsonKind(base, w) != kind {
			t.Fatalf("splitKind(%q) = %q, %v: does not round-trip", kind, base, w)
		}
	})
}
