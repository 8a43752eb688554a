package outputproc

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sluice-llm/sluice/ipc"
	"github.com/sluice-llm/sluice/outputproc/reasoning"
	"github.com/sluice-llm/sluice/outputproc/toolparse"
)

// goldenCall and goldenResult are the shapes of the tool parsers' and
// reasoning parsers' golden files (outputproc/toolparse/testdata,
// outputproc/reasoning/testdata), read here unchanged.
type goldenCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type goldenResult struct {
	Reasoning string       `json:"reasoning"`
	Content   string       `json:"content"`
	Calls     []goldenCall `json:"calls"`
}

// runProcessor feeds text as byte tokens, step tokens per engine output,
// through a Processor made by mk, the engine finishing with a stop on EOS,
// and folds the typed deltas into a result (checking the per-delta
// contract on the way).
func runProcessor(t *testing.T, text string, step, interval int, mk func() Options) (goldenResult, FinishReason) {
	t.Helper()
	o := mk()
	o.Text.StreamInterval = interval
	o.Text.EOSIDs = []int32{eos}
	p := NewProcessor(byteTok{}, o)
	ids := append(byteTok{}.Encode(text, false), eos)
	var acc Accumulator
	var got goldenResult
	n, seen := 0, 0
	for i := 0; i < len(ids); {
		k := min(step, len(ids)-i)
		out := &ipc.Output{NewTokenIDs: ids[i : i+k], StopReason: -1}
		i += k
		if i == len(ids) {
			out.FinishReason = ipc.FinishStop
		}
		d, abort := p.Process(out, false)
		if abort {
			t.Fatalf("abort without stop strings")
		}
		if d == nil {
			continue
		}
		if d.First != (n == 0) {
			t.Fatalf("delta %d: First = %v", n, d.First)
		}
		n++
		for _, c := range d.ToolCalls {
			if c.Index == seen {
				if c.Name == "" || c.ID == "" {
					t.Fatalf("first fragment of call %d lacks id or name: %+v", c.Index, c)
				}
				seen++
			}
		}
		acc.Add(d)
		if d.Usage.CompletionTokens != i {
			t.Fatalf("usage %d tokens after %d", d.Usage.CompletionTokens, i)
		}
	}
	if !p.Finished() || !acc.Finish.Reason.finished() {
		t.Fatalf("not finished after the last output")
	}
	got.Reasoning = acc.Reasoning.String()
	got.Content = acc.Content.String()
	for _, c := range acc.ToolCalls {
		got.Calls = append(got.Calls, goldenCall{Name: c.Name, Arguments: c.Arguments})
	}
	return got, acc.Finish.Reason
}

func (f FinishReason) finished() bool { return f != FinishNone }

func readGolden(t *testing.T, path string) goldenResult {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var g goldenResult
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
	return g
}

// steps returns every chunk size from 1 token to the whole text.
func steps(n int) []int {
	s := make([]int, 0, n+1)
	for k := 1; k <= n+1; k++ {
		s = append(s, k)
	}
	return s
}

// TestProcessorToolGoldens feeds every tool-parser golden through the whole
// output processor at every chunk size and stream intervals 1 and 7: the
// typed deltas must add up to the golden content and calls, and a case with
// calls must finish with FinishToolCalls.
func TestProcessorToolGoldens(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("toolparse", "testdata", "tools.json"))
	if err != nil {
		t.Fatalf("read tools: %v", err)
	}
	var tools []toolparse.Tool
	if err := json.Unmarshal(raw, &tools); err != nil {
		t.Fatal(err)
	}
	for _, name := range toolparse.Names() {
		files, _ := filepath.Glob(filepath.Join("toolparse", "testdata", name, "*.txt"))
		if len(files) == 0 {
			t.Fatalf("no goldens for %s", name)
		}
		for _, file := range files {
			t.Run(name+"/"+strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
				text, err := os.ReadFile(file)
				if err != nil {
					t.Fatal(err)
				}
				want := readGolden(t, strings.TrimSuffix(file, ".txt")+".golden.json")
				mk := func() Options {
					n := 0
					tp, err := toolparse.New(name, tools, func() string { n++; return fmt.Sprintf("call_%d", n) })
					if err != nil {
						t.Fatal(err)
					}
					return Options{Tools: tp}
				}
				for _, interval := range []int{1, 7} {
					for _, step := range steps(len(text)) {
						got, fr := runProcessor(t, string(text), step, interval, mk)
						if !reflect.DeepEqual(got, want) {
							t.Fatalf("step %d interval %d:\n got %+v\nwant %+v", step, interval, got, want)
						}
						if wantFR := map[bool]FinishReason{true: FinishToolCalls, false: FinishStop}[len(want.Calls) > 0]; fr != wantFR {
							t.Fatalf("step %d: finish %v, want %v", step, fr, wantFR)
						}
					}
				}
			})
		}
	}
}

// TestProcessorReasoningGoldens does the same with the reasoning goldens.
func TestProcessorReasoningGoldens(t *testing.T) {
	variants := map[string]struct {
		name string
		opts reasoning.Options
	}{
		"deepseek_r1":  {"deepseek_r1", reasoning.Options{}},
		"qwen3":        {"qwen3", reasoning.Options{}},
		"qwen3_opened": {"qwen3", reasoning.Options{ThinkingOpenedInPrompt: true}},
	}
	for dir, v := range variants {
		files, _ := filepath.Glob(filepath.Join("reasoning", "testdata", dir, "*.txt"))
		if len(files) == 0 {
			t.Fatalf("no goldens for %s", dir)
		}
		for _, file := range files {
			t.Run(dir+"/"+strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
				text, err := os.ReadFile(file)
				if err != nil {
					t.Fatal(err)
				}
				want := readGolden(t, strings.TrimSuffix(file, ".txt")+".golden.json")
				mk := func() Options {
					rp, err := reasoning.New(v.name, v.opts)
					if err != nil {
						t.Fatal(err)
					}
					return Options{Reasoning: rp}
				}
				for _, interval := range []int{1, 5} {
					for _, step := range steps(len(text)) {
						got, fr := runProcessor(t, string(text), step, interval, mk)
						if !reflect.DeepEqual(got, want) {
							t.Fatalf("step %d interval %d:\n got %+v\nwant %+v", step, interval, got, want)
						}
						if fr != FinishStop {
							t.Fatalf("finish %v", fr)
						}
					}
				}
			})
		}
	}
}

// TestProcessorNamedTool: a named tool_choice's bare arguments become one
// call whose first fragment carries the id and name, even when empty.
func TestProcessorNamedTool(t *testing.T) {
	cases := []struct {
		name, text string
		want       []ToolCallDelta
	}{
		{"arguments", `{"city": "Oslo"}`, []ToolCallDelta{{Index: 0, ID: "id-1", Name: "get_weather", Arguments: `{"city": "Oslo"}`}}},
		{"empty", ``, []ToolCallDelta{{Index: 0, ID: "id-1", Name: "get_weather"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, step := range steps(len(c.text)) {
				var acc Accumulator
				p := NewProcessor(byteTok{}, Options{NamedTool: "get_weather", NamedChoice: true, ToolID: func() string { return "id-1" },
					Text: Params{EOSIDs: []int32{eos}}})
				ids := append(byteTok{}.Encode(c.text, false), eos)
				for i := 0; i < len(ids); {
					k := min(step, len(ids)-i)
					out := &ipc.Output{NewTokenIDs: ids[i : i+k], StopReason: -1}
					i += k
					if i == len(ids) {
						out.FinishReason = ipc.FinishStop
					}
					if d, _ := p.Process(out, false); d != nil {
						if d.Content != "" {
							t.Fatalf("content %q with a named tool", d.Content)
						}
						acc.Add(d)
					}
				}
				if !reflect.DeepEqual(acc.ToolCalls, c.want) || acc.Finish.Reason != FinishStop {
					t.Fatalf("step %d: calls %+v finish %v, want %+v stop", step, acc.ToolCalls, acc.Finish.Reason, c.want)
				}
			}
		})
	}
}

// TestProcessorEchoFailAndStop covers echo, a stop string (abort + stop
// reason) and Fail (flush + FinishError) in typed deltas.
func TestProcessorEchoFailAndStop(t *testing.T) {
	p := NewProcessor(byteTok{}, Options{Index: 3, Echo: "Q: ", Text: Params{Stops: []string{"END"}, PromptIDs: []int32{1, 2}}})
	d, abort := p.Process(&ipc.Output{NewTokenIDs: byteTok{}.Encode("hi", false), StopReason: -1, NumCachedTokens: 1}, false)
	if d == nil || abort || d.Content != "Q: hi" || d.Index != 3 || !d.First || d.Usage != (Usage{PromptTokens: 2, CompletionTokens: 2, CachedTokens: 1}) {
		t.Fatalf("first delta %+v abort %v", d, abort)
	}
	d, abort = p.Process(&ipc.Output{NewTokenIDs: byteTok{}.Encode(" thENDere", false), StopReason: -1}, false)
	if d == nil || !abort || d.Content != " th" || d.Finish.Reason != FinishStop || d.Finish.Stop != (StopReason{Text: "END", IsText: true}) {
		t.Fatalf("stop delta %+v abort %v", d, abort)
	}
	if p.Fail("late") != nil {
		t.Fatalf("Fail after finish returned a delta")
	}

	p = NewProcessor(byteTok{}, Options{Text: Params{StreamInterval: 100}})
	p.Process(&ipc.Output{NewTokenIDs: byteTok{}.Encode("a", false), StopReason: -1}, false)
	if d, _ := p.Process(&ipc.Output{NewTokenIDs: byteTok{}.Encode("bc", false), StopReason: -1}, false); d != nil {
		t.Fatalf("interval 100 emitted %+v", d)
	}
	d = p.Fail("engine is down")
	if d == nil || d.Content != "bc" || !d.Failed() || d.Finish.Error != "engine is down" {
		t.Fatalf("fail delta %+v", d)
	}
}
