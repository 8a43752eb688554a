package toolparse

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// proseAnswer returns about tokens*4 bytes of prose sprinkled with the
// characters that start markup (<, [, {), so the holdback path runs.
func proseAnswer(tokens int) string {
	words := []string{"The", "model", "answers", "in", "plain", "prose,", "with", "a < b", "and", "[1]", "or", "{x}", "<b>bold</b>", "東京", "🌤️", "text.\n"}
	var sb strings.Builder
	for i := 0; sb.Len() < tokens*4; i++ {
		sb.WriteString(words[i%len(words)])
		sb.WriteByte(' ')
	}
	return sb.String()
}

// pieces4 cuts text into 4-byte deltas, as a detokenizer would send
// roughly one token at a time.
func pieces4(text string) []string {
	var out []string
	for i := 0; i < len(text); i += 4 {
		out = append(out, text[i:min(i+4, len(text))])
	}
	return out
}

func benchFeed(b *testing.B, parser string, tools []Tool, text string) {
	ps := pieces4(text)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		p, err := New(parser, tools, func() string { return "id" })
		if err != nil {
			b.Fatal(err)
		}
		for _, s := range ps {
			p.Add(s)
		}
		p.Finish()
	}
	b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(b.N*len(ps)), "ns/add")
}

// BenchmarkProse measures Add on a long prose answer with tools present,
// 4 bytes per delta, at 1000/4000/16000 tokens: a flat ns/add across sizes
// shows the cost is O(delta), not O(text so far).
//
//	go test -run XXX -bench BenchmarkProse -benchtime 20x ./outputproc/toolparse
func BenchmarkProse(b *testing.B) {
	tools := loadTools(b)
	for _, parser := range Names() {
		for _, tokens := range []int{1000, 4000, 16000} {
			text := proseAnswer(tokens)
			b.Run(fmt.Sprintf("%s/tokens=%d", parser, tokens), func(b *testing.B) {
				benchFeed(b, parser, tools, text)
			})
		}
	}
}

// BenchmarkArguments measures Add while a call streams one long string
// argument (4000/16000 tokens), 4 bytes per delta.
//
//	go test -run XXX -bench BenchmarkArguments -benchtime 20x ./outputproc/toolparse
func BenchmarkArguments(b *testing.B) {
	tools := loadTools(b)
	for _, parser := range Names() {
		for _, tokens := range []int{4000, 16000} {
			saved := longArg
			longArg = proseAnswer(tokens)
			text := map[string]string{
				"hermes":      `<tool_call>{"name": "write_file", "arguments": {"path": "a", "content": ` + mustJSON(longArg) + `}}</tool_call>`,
				"llama3_json": `<|python_tag|>{"name": "write_file", "parameters": {"path": "a", "content": ` + mustJSON(longArg) + `}}`,
				"mistral":     `[TOOL_CALLS]write_file[ARGS]{"path": "a", "content": ` + mustJSON(longArg) + `}`,
				"qwen3_coder": "<tool_call>\n<function=write_file>\n<parameter=path>\na\n</parameter>\n<parameter=content>\n" + longArg + "\n</parameter>\n</function>\n</tool_call>",
				"deepseek_v3": "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>write_file\n```json\n{\"path\": \"a\", \"content\": " + mustJSON(longArg) + "}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
				"pythonic":    `[write_file(path="a", content=` + pyRepr(longArg) + `)]`,
			}[parser]
			longArg = saved
			b.Run(fmt.Sprintf("%s/tokens=%d", parser, tokens), func(b *testing.B) {
				benchFeed(b, parser, tools, text)
			})
		}
	}
}

// BenchmarkTail measures the cost of 1000 more 4-byte Adds after an answer
// of prior tokens already went through the parser. If Add re-parsed the
// text so far, ns/add would grow with prior; it stays flat.
//
//	go test -run XXX -bench BenchmarkTail -benchtime 50x ./outputproc/toolparse
func BenchmarkTail(b *testing.B) {
	tools := loadTools(b)
	for _, parser := range Names() {
		for _, prior := range []int{0, 4000, 16000, 64000} {
			head := pieces4(proseAnswer(prior))
			if prior == 0 {
				head = nil
			}
			tail := pieces4(proseAnswer(1000))
			b.Run(fmt.Sprintf("%s/prior=%d", parser, prior), func(b *testing.B) {
				b.ReportAllocs()
				var spent time.Duration
				for i := 0; i < b.N; i++ {
					p, err := New(parser, tools, nil)
					if err != nil {
						b.Fatal(err)
					}
					for _, s := range head {
						p.Add(s)
					}
					start := time.Now()
					for _, s := range tail {
						p.Add(s)
					}
					spent += time.Since(start)
				}
				b.ReportMetric(float64(spent.Nanoseconds())/float64(b.N*len(tail)), "ns/add")
			})
		}
	}
}
