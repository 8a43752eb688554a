package responses

import (
	"testing"

	"github.com/sluice-llm/sluice/api-frontend/render"
	"github.com/sluice-llm/sluice/outputproc"
)

// BenchmarkAppendDelta is the per-token render cost of a text delta on an
// open item, beside the chat renderer's for the same delta.
//
//	go test -run XXX -bench AppendDelta -benchmem ./api-frontend/responses/
func BenchmarkAppendDelta(b *testing.B) {
	d := outputproc.Delta{Content: " token", Usage: outputproc.Usage{PromptTokens: 10, CompletionTokens: 5}}
	run := func(b *testing.B, r render.Renderer) {
		buf := r.AppendDelta(nil, &outputproc.Delta{First: true, Content: "start"})
		b.ReportAllocs()
		for b.Loop() {
			buf = r.AppendDelta(buf[:0], &d)
		}
	}
	b.Run("responses", func(b *testing.B) { run(b, NewStream(testMeta())) })
	b.Run("chat", func(b *testing.B) {
		run(b, render.NewChat(render.Request{ID: "chatcmpl-x", Created: 1700000000, Model: "demo", ReasoningField: "reasoning"}))
	})
}
