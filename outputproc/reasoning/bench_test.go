package reasoning

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// thoughts returns about tokens*4 bytes of reasoning text containing '<'
// characters, so the partial-tag holdback path runs.
func thoughts(tokens int) string {
	words := []string{"Let", "me", "think:", "a < b", "so", "<b>", "holds;", "東京", "🤔", "then\n"}
	var sb strings.Builder
	for i := 0; sb.Len() < tokens*4; i++ {
		sb.WriteString(words[i%len(words)])
		sb.WriteByte(' ')
	}
	return sb.String()
}

// BenchmarkAdd feeds <think>reasoning</think>answer in 4-byte deltas; a
// flat ns/add across sizes shows the cost is O(delta).
//
//	go test -run XXX -bench . -benchtime 30x ./outputproc/reasoning
func BenchmarkAdd(b *testing.B) {
	for _, name := range Names() {
		for _, tokens := range []int{1000, 4000, 16000} {
			text := "<think>" + thoughts(tokens) + "</think>\n\n" + thoughts(tokens/4)
			var ps []string
			for i := 0; i < len(text); i += 4 {
				ps = append(ps, text[i:min(i+4, len(text))])
			}
			b.Run(fmt.Sprintf("%s/tokens=%d", name, tokens), func(b *testing.B) {
				b.ReportAllocs()
				start := time.Now()
				for i := 0; i < b.N; i++ {
					p, _ := New(name, Options{})
					for _, s := range ps {
						p.Add(s)
					}
					p.Finish()
				}
				b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(b.N*len(ps)), "ns/add")
			})
		}
	}
}
