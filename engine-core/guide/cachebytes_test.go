package guide

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

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

// TestHugeGrammarRefused: one grammar over the size limit is refused with
// a short message naming the flag: by constraint.CheckBytes (the frontend's
// 400) at the default constraint.MaxGrammarBytes, and by the engine's
// compiler at its Options.MaxGrammarBytes (--max-grammar-bytes), which a
// smaller setting lowers; the constructor alone no longer applies a size
// limit, so the flag can raise it.
func TestHugeGrammarRefused(t *testing.T) {
	huge, err := constraint.JSONSchema(json.RawMessage(wideSchema(0, 10000)), true)
	if err != nil {
		t.Fatalf("10 000-property schema does not parse: %v", err)
	}
	mid := schemaConstraint(t, wideSchema(1, 600))
	vocab := testVocab(t)
	small := NewCompilerWithOptions(vocab, Options{MaxGrammarBytes: 1 << 20})
	cases := []struct {
		name    string
		compile func() error
		limit   string // "" when it must compile
	}{
		{"default check, huge", func() error { return constraint.CheckBytes(huge, constraint.MaxGrammarBytes) }, "limit of 64 MiB"},
		{"default check, 600 properties", func() error { return constraint.CheckBytes(mid, constraint.MaxGrammarBytes) }, ""},
		{"1 MiB check, 600 properties", func() error { return constraint.CheckBytes(mid, 1<<20) }, "limit of 1 MiB"},
		{"engine default, huge", func() error {
			_, err := NewCompiler(vocab, 64).Compile(huge, time.Now().Add(time.Minute))
			return err
		}, "limit of 64 MiB"},
		{"engine 1 MiB, 600 properties", func() error {
			_, err := small.Compile(mid, time.Now().Add(time.Minute))
			return err
		}, "limit of 1 MiB"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.compile()
			if tc.limit == "" {
				if err != nil {
					t.Fatalf("want it compiled, got %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "grammar too large") || !strings.Contains(err.Error(), tc.limit) ||
				!strings.Contains(err.Error(), "--max-grammar-bytes") || len(err.Error()) > 200 {
				t.Fatalf("got %v; want a short 'grammar too large' naming %q and --max-grammar-bytes", err, tc.limit)
			}
		})
	}
}
