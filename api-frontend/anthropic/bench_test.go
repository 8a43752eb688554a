package anthropic

import (
	"testing"

	"github.com/sluice-llm/sluice/outputproc"
)

// BenchmarkAppendDelta is the per-token render cost of a text delta on an
// open block.
//
//	go test -run XXX -bench AppendDelta -benchmem ./api-frontend/anthropic/
func BenchmarkAppendDelta(b *testing.B) {
	s := NewStream(testMeta())
	buf := s.AppendDelta(nil, &outputproc.Delta{First: true, Content: "start"})
	d := outputproc.Delta{Content: " token"}
	b.ReportAllocs()
	for b.Loop() {
		buf = s.AppendDelta(buf[:0], &d)
	}
}
