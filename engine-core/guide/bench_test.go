package guide

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-llm/sluice/constraint"
	"github.com/sluice-llm/sluice/ipc"
)

type replayCase struct {
	Name      string          `json:"name"`
	Schema    json.RawMessage `json:"schema"`
	Instances []string        `json:"instances"`
}

func loadReplay(t testing.TB) []replayCase {
	t.Helper()
	raw, err := os.ReadFile("testdata/replay.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []replayCase
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	return cases
}

func (rc replayCase) constraint(t testing.TB) ipc.Constraint {
	if string(rc.Schema) == "null" {
		return constraint.JSONObject()
	}
	ct, err := constraint.JSONSchema(rc.Schema, true)
	if err != nil {
		t.Fatalf("%s: %v", rc.Name, err)
	}
	return ct
}

// spell tokenizes s greedily: at each position the longest vocabulary
// token (from the trie) that the matcher allows. It advances m.
func spell(t testing.TB, m *Matcher, s string) []int32 {
	t.Helper()
	v := m.g.vocab
	var out []int32
	var cands []int32
	for pos := 0; pos < len(s); {
		cands = cands[:0]
		// Walk the trie along s collecting the tokens on the path.
		n := int32(0)
		for d := 0; pos+d < len(s); d++ {
			next := int32(-1)
			for c := n + 1; c < v.nodes[n].end; c = v.nodes[c].end {
				if v.nodes[c].b == s[pos+d] {
					next = c
					break
				}
			}
			if next < 0 {
				break
			}
			n = next
			if v.nodes[n].tok >= 0 {
				cands = append(cands, v.nodes[n].tok)
			}
		}
		ok := false
		for i := len(cands) - 1; i >= 0; i-- {
			if m.Allows(cands[i]) {
				if err := m.Accept(cands[i]); err != nil {
					t.Fatal(err)
				}
				out = append(out, cands[i])
				pos += len(v.toks[cands[i]])
				ok = true
				break
			}
		}
		if !ok {
			t.Fatalf("cannot spell %q at %d", s, pos)
		}
	}
	return out
}

// threadCPU returns the calling thread's CPU time: on a shared, loaded
// machine it excludes time the thread spent preempted.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// maskTimes are per-mask timings: thread CPU time (what the mask cost,
// without time preempted on a loaded machine) and wall-clock time.
type maskTimes struct{ cpu, wall []time.Duration }

func (a *maskTimes) add(b maskTimes) {
	a.cpu = append(a.cpu, b.cpu...)
	a.wall = append(a.wall, b.wall...)
}

// replayTimes replays every instance of every case, timing each Mask
// (thread CPU and wall time; the goroutine is locked to its thread).
func replayTimes(t testing.TB, c *Compiler, cases []replayCase) maskTimes {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var times maskTimes
	for _, rc := range cases {
		ct := rc.constraint(t)
		for _, inst := range rc.Instances {
			m := mustMatcher(t, c, ct)
			toks := spell(t, m, inst)
			m = mustMatcher(t, c, ct)
			mask := NewBitmask(c.vocab.Size())
			for _, tok := range append(toks, c.vocab.eos[0]) {
				st, wst := threadCPU(), time.Now()
				m.Mask(mask)
				times.wall = append(times.wall, time.Since(wst))
				times.cpu = append(times.cpu, threadCPU()-st)
				if !mask.Allowed(tok) {
					t.Fatalf("%s: mask forbids %q", rc.Name, c.vocab.toks[tok])
				}
				if err := m.Accept(tok); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	return times
}

func report(b *testing.B, times []time.Duration) {
	slices.Sort(times)
	q := func(p float64) float64 { return float64(times[int(p*float64(len(times)-1))].Nanoseconds()) / 1e3 }
	var sum time.Duration
	for _, d := range times {
		sum += d
	}
	b.ReportMetric(float64(sum.Nanoseconds())/1e3/float64(len(times)), "mean-µs")
	b.ReportMetric(q(0.5), "p50-µs")
	b.ReportMetric(q(0.9), "p90-µs")
	b.ReportMetric(q(0.99), "p99-µs")
	b.ReportMetric(q(1), "max-µs")
	b.ReportMetric(float64(len(times)), "samples")
}

// reportMasks reports thread CPU percentiles (see report) and wall-clock
// p50, p99 and max.
func reportMasks(b *testing.B, times maskTimes) {
	report(b, times.cpu)
	w := times.wall
	slices.Sort(w)
	q := func(p float64) float64 { return float64(w[int(p*float64(len(w)-1))].Nanoseconds()) / 1e3 }
	b.ReportMetric(q(0.5), "wall-p50-µs")
	b.ReportMetric(q(0.99), "wall-p99-µs")
	b.ReportMetric(q(1), "wall-max-µs")
}

// BenchmarkMaskReplay reports per-mask thread CPU time percentiles (the
// machine this runs on is shared, so wall time includes preemption), and
// wall-clock p50/p99/max (wall-*). It
// replays valid instances of realistic schemas
// (testdata/replay.json), MaskBench-style, timing every mask:
//   - cold: fresh compiler (terminal caches empty: first request ever);
//   - cold-warmed: fresh compiler after Compiler.Warm (engine start-up);
//   - miss: state→mask cache disabled, terminal caches warm (a new schema
//     whose lexemes were seen before: the steady-state uncached cost);
//   - hit: same schema replayed again with all caches on.
func BenchmarkMaskReplay(b *testing.B) {
	cases := loadReplay(b)
	for _, rv := range realVocabs(b) {
		b.Run(rv.name+"/cold", func(b *testing.B) {
			var times maskTimes
			for b.Loop() {
				c := NewCompiler(rv.v, 64)
				times.add(replayTimes(b, c, cases))
			}
			reportMasks(b, times)
		})
		b.Run(rv.name+"/cold-warmed", func(b *testing.B) {
			var times maskTimes
			for b.Loop() {
				c := NewCompiler(rv.v, 64)
				b.StopTimer()
				if err := c.Warm(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				times.add(replayTimes(b, c, cases))
			}
			reportMasks(b, times)
		})
		b.Run(rv.name+"/miss", func(b *testing.B) {
			c := NewCompilerWithOptions(rv.v, Options{MaskCacheBytes: 1})
			replayTimes(b, c, cases)
			var times maskTimes
			for b.Loop() {
				times.add(replayTimes(b, c, cases))
			}
			reportMasks(b, times)
		})
		b.Run(rv.name+"/hit", func(b *testing.B) {
			c := NewCompiler(rv.v, 64)
			replayTimes(b, c, cases)
			var times maskTimes
			for b.Loop() {
				times.add(replayTimes(b, c, cases))
			}
			reportMasks(b, times)
		})
	}
}

// BenchmarkMaskCached is one cached mask in the widest state, inside a
// free JSON string (most of the vocabulary allowed).
func BenchmarkMaskCached(b *testing.B) {
	for _, rv := range realVocabs(b) {
		b.Run(rv.name, func(b *testing.B) {
			c := NewCompiler(rv.v, 8)
			m := mustMatcher(b, c, constraint.JSONObject())
			spell(b, m, `{"text": "hello`)
			mask := NewBitmask(rv.v.Size())
			m.Mask(mask)
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			st := threadCPU()
			n := 0
			for b.Loop() {
				m.Mask(mask)
				n++
			}
			b.ReportMetric(float64((threadCPU()-st).Nanoseconds())/float64(n), "cpu-ns/op")
			b.ReportMetric(float64(mask.Count()), "allowed")
		})
	}
}

var compileSchemas = []struct{ name, schema string }{
	{"small", `{"type":"object","properties":{"answer":{"type":"string"},"confidence":{"type":"number","minimum":0,"maximum":1}},"required":["answer","confidence"],"additionalProperties":false}`},
	{"person", `{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer","minimum":0,"maximum":150},"email":{"type":"string","format":"email"},"tags":{"type":"array","items":{"type":"string"},"maxItems":5}},"required":["name","age"],"additionalProperties":false}`},
	{"order", `{"type":"object","properties":{"id":{"type":"string","format":"uuid"},"status":{"enum":["pending","shipped","delivered","cancelled"]},"created":{"type":"string","format":"date-time"},"items":{"type":"array","minItems":1,"items":{"$ref":"#/$defs/item"}},"total":{"type":"number","minimum":0},"note":{"type":["string","null"]}},"required":["id","status","items","total"],"$defs":{"item":{"type":"object","properties":{"sku":{"type":"string","pattern":"^[A-Z]{3}-[0-9]{4}$"},"qty":{"type":"integer","minimum":1},"price":{"type":"number"}},"required":["sku","qty","price"]}}}`},
}

// BenchmarkCompile is compile time (IR lowering, automata, grammar) on a
// fresh compiler each iteration; and first-mask: compile plus the first
// mask, cold (time to first mask).
func BenchmarkCompile(b *testing.B) {
	v := loadHFVocab(b, realVocabsPath(b, "qwen3"), "<|endoftext|>", "<|im_end|>")
	for _, s := range compileSchemas {
		ct := schemaConstraint(b, s.schema)
		b.Run(s.name, func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var cpu []time.Duration
			for b.Loop() {
				st := threadCPU()
				c := NewCompiler(v, 8)
				if _, err := c.build(ct); err != nil {
					b.Fatal(err)
				}
				cpu = append(cpu, threadCPU()-st)
			}
			report(b, cpu)
		})
		b.Run(s.name+"/first-mask", func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			mask := NewBitmask(v.Size())
			var cpu []time.Duration
			for b.Loop() {
				st := threadCPU()
				c := NewCompiler(v, 8)
				g, err := c.build(ct)
				if err != nil {
					b.Fatal(err)
				}
				g.NewMatcher(false).Mask(mask)
				cpu = append(cpu, threadCPU()-st)
			}
			report(b, cpu)
		})
	}
}

func realVocabsPath(t testing.TB, name string) string {
	return fmt.Sprintf("%s", testenvFile(t, "tokenizers/"+name+"/tokenizer.json"))
}

// BenchmarkMaskAccept is the steady-state step on a cache hit: Mask then
// Accept of a token inside a JSON string, rolled back so every iteration
// is the same step (checks the hot path allocates nothing).
func BenchmarkMaskAccept(b *testing.B) {
	for _, rv := range realVocabs(b) {
		b.Run(rv.name, func(b *testing.B) {
			c := NewCompiler(rv.v, 8)
			m := mustMatcher(b, c, constraint.JSONObject())
			spell(b, m, `{"text": "hello`)
			mask := NewBitmask(rv.v.Size())
			m.Mask(mask)
			tok := int32(-1)
			for _, id := range []string{" world", "world", " w", "w"} {
				if t := findToken(rv.v, id); t >= 0 {
					tok = t
					break
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				m.Mask(mask)
				if err := m.Accept(tok); err != nil {
					b.Fatal(err)
				}
				if err := m.Rollback(1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func findToken(v *Vocab, s string) int32 {
	for id, t := range v.toks {
		if string(t) == s && !v.special[id] {
			return int32(id)
		}
	}
	return -1
}

// BenchmarkNewVocab is the once-per-model preparation: token trie, slices
// and length classes.
func BenchmarkNewVocab(b *testing.B) {
	for _, rv := range realVocabs(b) {
		b.Run(rv.name, func(b *testing.B) {
			special := func(id int32) bool { return rv.v.special[id] }
			for b.Loop() {
				if _, err := NewVocab(rv.v.toks, rv.v.eos, special); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
