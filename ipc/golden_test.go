package ipc

import (
	"bytes"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/frames.golden")

// goldenMessages is one fixed message of every kind, with every field set
// (and an Outputs with logprobs, events, an error and stats), so that any
// change to the bytes on the wire shows up as a diff of frames.golden.
func goldenMessages() []struct {
	name string
	kind Kind
	msg  any
} {
	outs := &Outputs{EngineID: "engine-0", Step: 42, Timestamp: 1700000000.25, Outputs: []Output{
		{RequestID: "cmpl-1-0", NewTokenIDs: []int32{1, 300, 70000}, FinishReason: FinishNone, StopReason: -1, NumCachedTokens: 16,
			Logprobs: []TokenLogprobs{{Logprob: -0.5, Rank: 1, TopIDs: []int32{1, 2}, TopLogprobs: []float32{-0.5, -1.5}}, {Logprob: -1}, {Logprob: -2, Rank: 3}},
			Events:   []Event{{Type: EventQueued, Timestamp: 1.5}, {Type: EventScheduled, Timestamp: 2}}},
		{RequestID: "chatcmpl-2-1", NewTokenIDs: []int32{2}, FinishReason: FinishStop, StopReason: 2},
		{RequestID: "cmpl-3-0", FinishReason: FinishError, StopReason: -1, Error: "engine: out of memory"},
	}, Stats: &SchedulerStats{Running: 3, Waiting: 4, KVUsage: 0.25, NumKVBlocks: 100, PrefixQueries: 1 << 40, PrefixHits: 7,
		Preemptions: 2, StepCount: 99, GeneratedTokens: 5, PromptTokens: 6, StepTimeMicros: 7, FinishedRequests: 8, RunningByFrontend: 1}}
	add := &AddRequest{RequestID: "cmpl-1-0", PromptTokenIDs: []int32{1, 2, 3, 40000}, ArrivalTime: 1700000000.5, Priority: -2,
		Params: SamplingParams{Temperature: 0.7, TopP: 0.9, TopK: 40, MinP: 0.05, HasSeed: true, Seed: -7, MaxTokens: 128, MinTokens: 2,
			StopTokenIDs: []int32{2, 3}, IgnoreEOS: true, PresencePenalty: 0.1, FrequencyPenalty: 0.2, RepetitionPenalty: 1.1,
			LogitBias: []LogitBias{{Token: 5, Bias: -100}}, AllowedTokenIDs: []int32{7}, BadWords: [][]int32{{1, 2}, {3}}, Logprobs: 5,
			Constraint: &Constraint{Kind: "json_schema", Spec: `{"type":"object"}`, Hash: "abc", AfterReasoning: true}}}
	return []struct {
		name string
		kind Kind
		msg  any
	}{
		{"hello", KindHello, &Hello{ProtocolVersion: ProtocolVersion, FrontendID: "fe-1", PID: 42, ModelName: "m"}},
		{"ready", KindReady, &Ready{ProtocolVersion: 1, EngineID: "e", ModelName: "m", MaxModelLen: 2048, VocabSize: 32000, EOSTokenIDs: []int32{2}, BlockSize: 16, NumKVBlocks: 1000, PID: 7, ModelFingerprint: "fp"}},
		{"reject", KindReject, &Reject{Reason: "no"}},
		{"add", KindAdd, add},
		{"abort", KindAbort, &Abort{RequestIDs: []string{"a", "b"}}},
		{"outputs", KindOutputs, outs},
		{"outputs-empty", KindOutputs, &Outputs{EngineID: "e", Step: 1}},
		{"utility", KindUtility, &Utility{CallID: 9, Method: "reset_prefix_cache", Args: []byte{0x90}}},
		{"utility-result", KindUtilityResult, &UtilityResult{CallID: 9, Result: []byte{0xc0}, Error: "x"}},
		{"ping", KindPing, &Ping{Time: 1.5}},
		{"pong", KindPong, &Ping{Time: 2.5}},
		{"shutdown", KindShutdown, &Shutdown{Reason: "bye"}},
	}
}

// TestGoldenFrames pins the wire bytes of every message kind
// (testdata/frames.golden, one "name hex" line each; -update rewrites it)
// and decodes each golden frame back to its message.
func TestGoldenFrames(t *testing.T) {
	c := NewCodec()
	var got strings.Builder
	for _, m := range goldenMessages() {
		frame, err := c.Encode(m.kind, m.msg)
		if err != nil {
			t.Fatalf("%s: %v", m.name, err)
		}
		fmt.Fprintf(&got, "%s %s\n", m.name, hex.EncodeToString(frame))
	}
	path := filepath.Join("testdata", "frames.golden")
	if *update {
		if err := os.WriteFile(path, []byte(got.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (run with -update to create): %v", err)
	}
	if got.String() != string(want) {
		t.Fatalf("wire bytes differ from %s:\n got:\n%s\nwant:\n%s", path, got.String(), want)
	}
	lines := strings.Split(strings.TrimSpace(string(want)), "\n")
	for i, m := range goldenMessages() {
		name, hx, _ := strings.Cut(lines[i], " ")
		frame, err := hex.DecodeString(hx)
		if err != nil || name != m.name {
			t.Fatalf("golden line %d: %q, %v", i, name, err)
		}
		kind, msg, err := c.Decode(bytes.Clone(frame))
		if err != nil || kind != m.kind {
			t.Fatalf("%s: decode: kind %v, %v", name, kind, err)
		}
		if !reflect.DeepEqual(normalize(msg), normalize(m.msg)) {
			t.Fatalf("%s: decoded\n %+v\nwant\n %+v", name, normalize(msg), normalize(m.msg))
		}
	}
}
