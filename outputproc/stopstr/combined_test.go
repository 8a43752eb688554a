package stopstr

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-llm/sluice/internal/testenv"
	"github.com/sluice-llm/sluice/outputproc/detok"
	"github.com/sluice-llm/sluice/text/tokenizer"
)

// BenchmarkDetokAndStop measures the per-token frontend text path: one
// incremental-detokenizer Add followed by one stop-string Add, with the
// real Llama-3 tokenizer and three stop strings that never match.
func BenchmarkDetokAndStop(b *testing.B) {
	tok, err := tokenizer.LoadDir(filepath.Join(testenv.SharedModels(b), "tokenizers", "llama3"))
	if err != nil {
		b.Fatal(err)
	}
	text := strings.Repeat("Once upon a time, in Zürich, a café served 日本 tea 🙂. <b>Bold</b> #1 ## ", 20)
	ids := tok.Encode(text, false)
	stops := []string{"<|end|>", "###", "\n\nUser:"}
	for _, include := range []bool{false, true} {
		name := "exclude"
		if include {
			name = "include"
		}
		b.Run(name, func(b *testing.B) {
			d := detok.New(tok, detok.Options{SkipSpecial: true, PromptIDs: ids[:4]})
			m := New(stops, include)
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				if _, stopped, _ := m.Add(d.Add(ids[i : i+1])); stopped {
					b.Fatal("unexpected stop")
				}
				i++
				if i == len(ids) {
					i = 0
				}
			}
		})
	}
}
