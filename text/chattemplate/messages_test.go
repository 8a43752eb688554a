package chattemplate

import (
	"encoding/json"
	"testing"
)

// FuzzConvertMessage checks convertMessage (which decodes only the keys it
// reads) against convertMessageSlow (the whole message through the
// order-keeping decoder): the same dict, or both an error.
func FuzzConvertMessage(f *testing.F) {
	for _, seed := range []string{
		`{"role":"user","content":"hi"}`,
		`{"role":"system","content":null,"name":"x"}`,
		`{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}`,
		`{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}`,
		`{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"b\":1,\"a\":2}"}}]}`,
		`{"role":"assistant","content":"x","reasoning_content":"think","thinking":"t2"}`,
		`{"role":"tool","tool_call_id":7,"content":"42"}`,
		`{"role":"user","content":"a","role":"system"}`,
		`{"Role":"user","content":"hi"}`,
		`{"role":null,"content":"hi"}`,
		`{"role":"user","content":5}`,
		`{"role":"user","content":{}}`,
		`{"role":"user","content":"\ud800 \u00e9 \n"}`,
		`{"role":"assistant","tool_calls":{"a":1}}`,
		`{"role":"assistant","tool_calls":[{"function":{"arguments":"{bad"}}]}`,
		`{"role":"user","name":3,"content":"x","extra":[1e999,{"k":[]}]}`,
		`[]`, `null`, `"x"`, `{}`, `{"role":"user"`, `{"role":"user"} x`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		fast, ferr := convertMessage(raw)
		slow, serr := convertMessageSlow(raw)
		if (ferr == nil) != (serr == nil) {
			t.Fatalf("%q: convertMessage error %v, slow path error %v", raw, ferr, serr)
		}
		if ferr != nil {
			if ferr.Error() != serr.Error() {
				t.Fatalf("%q: errors differ: %v vs %v", raw, ferr, serr)
			}
			return
		}
		a, err := pyDumps(fast, defaultJSONOptions())
		if err != nil {
			t.Fatal(err)
		}
		b, err := pyDumps(slow, defaultJSONOptions())
		if err != nil {
			t.Fatal(err)
		}
		if a != b {
			t.Fatalf("%q: convertMessage %s, slow path %s", raw, a, b)
		}
	})
}

// TestConvertMessagePaths is a table of messages with the dict each one
// becomes (as Python's json.dumps would write it), or the error.
func TestConvertMessagePaths(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{in: `{"role":"user","content":"hi","extra":1}`, want: `{"role": "user", "content": "hi"}`},
		{in: `{"role":"system","content":null,"name":"n"}`, want: `{"role": "system", "content": "", "name": "n"}`},
		{in: `{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}`, want: `{"role": "user", "content": "a\nb"}`},
		{in: `{"role":"assistant","content":"","reasoning":"r","tool_calls":[{"function":{"name":"f","arguments":"{\"b\":1,\"a\":2}"}}]}`,
			want: `{"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": {"b": 1, "a": 2}}}], "reasoning": "r", "reasoning_content": "r", "thinking": "r"}`},
		{in: `{"role":"tool","tool_call_id":"c1","content":"42"}`, want: `{"role": "tool", "content": "42", "tool_call_id": "c1"}`},
		{in: `{"role":"user","content":"a","role":"system"}`, want: `{"role": "system", "content": "a"}`},
		{in: `{"Role":"user","content":"hi"}`, err: "message has no string role"},
		{in: `{"role":"user","content":5}`, err: "content must be a string, null or a list of parts"},
		{in: `[]`, err: "message is not a JSON object"},
		{in: `{"role":"user","content":[{"type":"image_url"}]}`, err: `content[0]: content part type "image_url" is not supported`},
	} {
		m, err := convertMessage(json.RawMessage(tc.in))
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("%s: error %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		got, err := pyDumps(m, defaultJSONOptions())
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.in, got, tc.want)
		}
	}
}
