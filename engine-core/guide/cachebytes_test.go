package guide

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/sluice-llm/sluice/constraint"
)

// wideSchema is an object schema with n string properties whose names
// depend on seed (so every seed is a distinct grammar).
func wideSchema(seed, n int) string {
	var sb strings.Builder
	sb.WriteString(`{"type":"object","properties":{`)
	for i := 0; i < n; i++ {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `"p%d_%d":{"type":"string"}`, seed, i)
	}
	sb.WriteString(`}}`)
	return sb.String()
}

func heapMB() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc >> 20)
}

// TestGrammarCacheBoundedByBytes: many distinct wide schemas (issue 21
// item 2: 20 distinct 10 000-property schemas took the engine to 1.69 GB)
// keep the compiled-grammar cache within Options.CacheBytes, and the heap
// with it; the estimate is within a factor of two of the measured growth.
func TestGrammarCacheBoundedByBytes(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles 12 wide grammars")
	}
	const limit = 16 << 20
	c := NewCompilerWithOptions(testVocab(t), Options{CacheSize: 64, CacheBytes: limit})
	base := heapMB()
	var first int64
	for i := 0; i < 12; i++ {
		ct := schemaConstraint(t, wideSchema(i, 600))
		m := mustMatcher(t, c, ct)
		spell(t, m, `{"p`)
		st := c.Stats()
		if i == 0 {
			first = st.Bytes
			grown := (heapMB() - base) << 20
			if first <= 0 || grown > 2*first || first > 2*grown+(4<<20) {
				t.Fatalf("estimate %d bytes, heap grew %d bytes", first, grown)
			}
		}
		if st.Bytes > limit {
			t.Fatalf("after grammar %d: cache holds %d bytes (%d grammars), limit %d", i, st.Bytes, st.Grammars, limit)
		}
	}
	if st := c.Stats(); st.Grammars >= 12 || st.Grammars < 2 {
		t.Fatalf("cache holds %d grammars of ~%d bytes with a %d-byte limit", st.Grammars, first, limit)
	}
	if grown := (heapMB() - base) << 20; grown > 3*limit {
		t.Fatalf("heap grew %d MB with a %d MB grammar cache", grown>>20, limit>>20)
	}
}

// TestHugeGrammarRefused: one grammar over constraint.MaxGrammarBytes is
// refused by the constraint check (the frontend's 400) with a short
// message, and so by the engine's compiler.
func TestHugeGrammarRefused(t *testing.T) {
	schema := json.RawMessage(wideSchema(0, 10000))
	_, err := constraint.JSONSchema(schema, true)
	if err == nil || !strings.Contains(err.Error(), "grammar too large") || len(err.Error()) > 200 {
		t.Fatalf("10 000-property schema: %v", err)
	}
}
