package openai

import (
	"fmt"
	"testing"
)

// TestConstraintCache: repeated requests reuse the compiled constraint
// (and the error), tool constraints too, and the cache stays bounded.
func TestConstraintCache(t *testing.T) {
	cache := NewConstraintCache(4)
	lim := Limits{Constraints: cache}
	body := `{"prompt":"p","response_format":{"type":"json_schema","json_schema":{"name":"x","schema":` + testSchema + `}}}`
	var first string
	for i := range 3 {
		var r CompletionRequest
		if e := Decode([]byte(body), &r); e != nil {
			t.Fatal(e)
		}
		c, e := r.Validate(lim)
		if e != nil {
			t.Fatal(e)
		}
		if i == 0 {
			first = c.Params.Constraint.Hash
		} else if c.Params.Constraint.Hash != first {
			t.Fatal("cached constraint differs")
		}
	}
	if cache.Len() != 1 {
		t.Fatalf("%d entries after one schema", cache.Len())
	}
	// Errors are cached and still name the field.
	for range 2 {
		var r CompletionRequest
		_ = Decode([]byte(`{"prompt":"p","guided_json":{"type":"object","not":{}}}`), &r)
		if _, e := r.Validate(lim); e == nil || e.Param != "guided_json" {
			t.Fatalf("cached error: %v", e)
		}
	}
	// The same schema with disable_any_whitespace is a different entry.
	var r CompletionRequest
	_ = Decode([]byte(`{"prompt":"p","guided_json":`+testSchema+`,"structured_outputs":{"disable_any_whitespace":true}}`), &r)
	if c, e := r.Validate(lim); e != nil || c.Params.Constraint.Kind != "json_schema+compact" {
		t.Fatalf("compact: %v", e)
	}
	// Tool constraints.
	const tools = `"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"string"}}}}}]`
	for range 2 {
		var cr ChatRequest
		_ = Decode([]byte(`{`+testMsgs+`,`+tools+`,"tool_choice":"required"}`), &cr)
		c, e := cr.Validate(lim, ToolConfig{Parser: "hermes"})
		if e != nil || c.ToolOutput != ToolOutputParser || c.Params.Constraint.Kind != "grammar" {
			t.Fatalf("tools: %v", e)
		}
	}
	for i := range 10 {
		var r CompletionRequest
		_ = Decode([]byte(fmt.Sprintf(`{"prompt":"p","guided_regex":"a{%d}"}`, i+1)), &r)
		if _, e := r.Validate(lim); e != nil {
			t.Fatal(e)
		}
	}
	if cache.Len() != 4 {
		t.Fatalf("cache holds %d entries, limit 4", cache.Len())
	}
}

// BenchmarkValidateStructured measures validating a chat request with a
// json_schema response_format, compiling it each time and from the cache.
func BenchmarkValidateStructured(b *testing.B) {
	const schema = `{"type":"object","properties":{"items":{"type":"array","minItems":40,"maxItems":40,"items":{"type":"object","properties":{"id":{"type":"integer"},"label":{"type":"string","maxLength":30},"ok":{"type":"boolean"}},"required":["id","label","ok"]}}},"required":["items"]}`
	body := []byte(`{` + testMsgs + `,"max_tokens":128,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":` + schema + `}}}`)
	for _, tc := range []struct {
		name  string
		cache *ConstraintCache
	}{{"compile", nil}, {"cached", NewConstraintCache(16)}} {
		b.Run(tc.name, func(b *testing.B) {
			lim := Limits{Constraints: tc.cache}
			b.ReportAllocs()
			for b.Loop() {
				var r ChatRequest
				if e := Decode(body, &r); e != nil {
					b.Fatal(e)
				}
				if _, e := r.Validate(lim, ToolConfig{}); e != nil {
					b.Fatal(e)
				}
			}
		})
	}
}
