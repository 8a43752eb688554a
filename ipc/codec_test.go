package ipc

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"syscall"
	"testing"
)

func randInt32s(r *rand.Rand, n int) []int32 {
	if n == 0 {
		return nil
	}
	v := make([]int32, n)
	for i := range v {
		v[i] = r.Int32N(1<<20) - 1000
	}
	return v
}

func randOutput(r *rand.Rand, withLogprobs bool) Output {
	o := Output{
		RequestID:       fmt.Sprintf("cmpl-%x", r.Uint64()),
		NewTokenIDs:     randInt32s(r, 1+r.IntN(8)),
		FinishReason:    FinishReason(r.IntN(5)),
		StopReason:      r.Int32N(100) - 1,
		NumCachedTokens: r.Int32N(1000),
	}
	if withLogprobs {
		for range o.NewTokenIDs {
			k := r.IntN(5)
			lp := TokenLogprobs{Logprob: -r.Float32() * 5, Rank: 1 + r.Int32N(10), TopIDs: randInt32s(r, k)}
			for j := 0; j < k; j++ {
				lp.TopLogprobs = append(lp.TopLogprobs, -r.Float32())
			}
			o.Logprobs = append(o.Logprobs, lp)
		}
	}
	if r.IntN(3) == 0 {
		o.Events = []Event{{Type: EventQueued, Timestamp: r.Float64() * 1e9}, {Type: EventFirstToken, Timestamp: r.Float64()}}
	}
	if o.FinishReason == FinishError {
		o.Error = "boom: ünïcode"
	}
	return o
}

func randMessages(r *rand.Rand) []struct {
	kind Kind
	msg  any
} {
	seed := int64(r.Uint64())
	outs := &Outputs{EngineID: "engine-0", Step: r.Uint64(), Timestamp: r.Float64() * 1e9}
	for i := 0; i < r.IntN(20); i++ {
		outs.Outputs = append(outs.Outputs, randOutput(r, r.IntN(2) == 0))
	}
	if r.IntN(2) == 0 {
		outs.Stats = &SchedulerStats{Running: 3, Waiting: 4, KVUsage: 0.25, NumKVBlocks: 100, PrefixQueries: 1 << 40, PrefixHits: 7,
			Preemptions: 2, StepCount: 99, GeneratedTokens: 5, PromptTokens: 6, StepTimeMicros: 7, FinishedRequests: 8, RunningByFrontend: 1}
	}
	add := &AddRequest{RequestID: "req-1", PromptTokenIDs: randInt32s(r, 1+r.IntN(50)), ArrivalTime: r.Float64() * 1e9, Priority: r.Int32N(10),
		Params: SamplingParams{Temperature: 0.7, TopP: 0.9, TopK: 40, MinP: 0.05, HasSeed: true, Seed: seed, MaxTokens: 128, MinTokens: 2,
			StopTokenIDs: []int32{2, 3}, IgnoreEOS: r.IntN(2) == 0, PresencePenalty: 0.1, FrequencyPenalty: 0.2, RepetitionPenalty: 1.1,
			LogitBias: []LogitBias{{Token: 5, Bias: -100}}, AllowedTokenIDs: randInt32s(r, r.IntN(3)), BadWords: [][]int32{{1, 2}, {3}},
			Logprobs: 5}}
	if r.IntN(2) == 0 {
		add.Params.Constraint = &Constraint{Kind: "json_schema", Spec: `{"type":"object"}`, Hash: "abc", AfterReasoning: true}
	}
	return []struct {
		kind Kind
		msg  any
	}{
		{KindHello, &Hello{ProtocolVersion: ProtocolVersion, FrontendID: "fe-1", PID: 42, ModelName: "m"}},
		{KindReady, &Ready{ProtocolVersion: 1, EngineID: "e", ModelName: "m", MaxModelLen: 2048, VocabSize: 32000, EOSTokenIDs: []int32{2}, BlockSize: 16, NumKVBlocks: 1000, PID: 7, ModelFingerprint: "fp"}},
		{KindReject, &Reject{Reason: "no"}},
		{KindAdd, add},
		{KindAbort, &Abort{RequestIDs: []string{"a", "b"}}},
		{KindOutputs, outs},
		{KindUtility, &Utility{CallID: 9, Method: "reset_prefix_cache", Args: []byte{0x90}}},
		{KindUtilityResult, &UtilityResult{CallID: 9, Result: []byte{0xc0}, Error: "x"}},
		{KindPing, &Ping{Time: 1.5}},
		{KindPong, &Ping{Time: 2.5}},
		{KindShutdown, &Shutdown{Reason: "bye"}},
	}
}

// normalize maps empty slices to nil so reflect.DeepEqual compares content.
func normalize(v any) any {
	switch m := v.(type) {
	case *Outputs:
		c := *m
		c.Outputs = nil
		for _, o := range m.Outputs {
			if len(o.NewTokenIDs) == 0 {
				o.NewTokenIDs = nil
			}
			if len(o.Logprobs) == 0 {
				o.Logprobs = nil
			}
			for i := range o.Logprobs {
				if len(o.Logprobs[i].TopIDs) == 0 {
					o.Logprobs[i].TopIDs = nil
					o.Logprobs[i].TopLogprobs = nil
				}
			}
			if len(o.Events) == 0 {
				o.Events = nil
			}
			c.Outputs = append(c.Outputs, o)
		}
		return &c
	case *AddRequest:
		c := *m
		if len(c.Params.AllowedTokenIDs) == 0 {
			c.Params.AllowedTokenIDs = nil
		}
		return &c
	}
	return v
}

// TestRoundTrip is the round-trip property test over every message kind.
func TestRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	c := NewCodec()
	for iter := 0; iter < 200; iter++ {
		for _, tc := range randMessages(r) {
			frame, err := c.Encode(tc.kind, tc.msg)
			if err != nil {
				t.Fatalf("encode %s: %v", tc.kind, err)
			}
			frame = append([]byte(nil), frame...)
			kind, got, err := c.Decode(frame)
			if err != nil {
				t.Fatalf("decode %s: %v", tc.kind, err)
			}
			if kind != tc.kind {
				t.Fatalf("kind %s, want %s", kind, tc.kind)
			}
			if !reflect.DeepEqual(normalize(got), normalize(tc.msg)) {
				t.Fatalf("%s round trip:\n got %+v\nwant %+v", tc.kind, normalize(got), normalize(tc.msg))
			}
		}
	}
}

// TestShortArrays checks that decoders accept arrays from an older peer
// that knew fewer fields.
func TestShortArrays(t *testing.T) {
	c := NewCodec()
	// Output with only [RequestID, NewTokenIDs].
	frame := []byte{byte(KindOutputs), 0x94, 0xa1, 'e', 0x05, 0xcb, 0, 0, 0, 0, 0, 0, 0, 0, 0x91, 0x92, 0xa2, 'r', '1', 0x91, 0x07}
	_, msg, err := c.Decode(frame)
	if err != nil {
		t.Fatal(err)
	}
	o := msg.(*Outputs)
	if o.EngineID != "e" || o.Step != 5 || len(o.Outputs) != 1 || o.Outputs[0].RequestID != "r1" || o.Outputs[0].NewTokenIDs[0] != 7 || o.Outputs[0].StopReason != -1 {
		t.Fatalf("short decode: %+v", o)
	}
	// Extra trailing fields are skipped.
	frame = []byte{byte(KindAbort), 0x92, 0x91, 0xa1, 'x', 0xc3}
	_, msg, err = c.Decode(frame)
	if err != nil {
		t.Fatal(err)
	}
	if ids := msg.(*Abort).RequestIDs; len(ids) != 1 || ids[0] != "x" {
		t.Fatalf("abort: %+v", ids)
	}
}

func TestHostileLengths(t *testing.T) {
	c := NewCodec()
	cases := map[string][]byte{
		"empty":          {},
		"unknown kind":   {200, 0x90},
		"huge array":     {byte(KindOutputs), 0xdd, 0x7f, 0xff, 0xff, 0xff},
		"huge token ids": {byte(KindOutputs), 0x94, 0xa0, 0x00, 0x00, 0xdd, 0x7f, 0xff, 0xff, 0xff},
		"truncated":      {byte(KindAdd), 0x95, 0xa5, 'a'},
		"wrong type":     {byte(KindAdd), 0x95, 0xc3, 0xc3},
	}
	for name, frame := range cases {
		if _, _, err := c.Decode(frame); err == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
}

// FuzzDecode checks that no frame makes the decoder panic, and that whatever
// decodes re-encodes and decodes to the same value.
func FuzzDecode(f *testing.F) {
	r := rand.New(rand.NewPCG(3, 4))
	c := NewCodec()
	for _, tc := range randMessages(r) {
		b, _ := c.Encode(tc.kind, tc.msg)
		f.Add(append([]byte(nil), b...))
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		c := NewCodec()
		kind, msg, err := c.Decode(frame)
		if err != nil {
			return
		}
		b, err := c.Encode(kind, msg)
		if err != nil {
			t.Fatalf("re-encode %s: %v", kind, err)
		}
		b = append([]byte(nil), b...)
		if _, _, err := c.Decode(b); err != nil {
			t.Fatalf("re-decode %s: %v", kind, err)
		}
	})
}

func benchBatch(n, toks int) *Outputs {
	r := rand.New(rand.NewPCG(5, 6))
	o := &Outputs{EngineID: "engine-0", Step: 1, Timestamp: 1.7e9, Stats: &SchedulerStats{Running: int32(n)}}
	for i := 0; i < n; i++ {
		o.Outputs = append(o.Outputs, Output{RequestID: fmt.Sprintf("cmpl-%032x", r.Uint64()), NewTokenIDs: randInt32s(r, toks), StopReason: -1})
	}
	return o
}

// BenchmarkOutputsCodec measures encode+decode of one step's batch of 1024
// outputs (one token each), the per-step cost the wire adds.
func BenchmarkOutputsCodec(b *testing.B) {
	for _, toks := range []int{1, 8} {
		b.Run(fmt.Sprintf("1024x%dtok", toks), func(b *testing.B) {
			batch := benchBatch(1024, toks)
			enc, dec := NewCodec(), NewCodec()
			var into Outputs
			b.ReportAllocs()
			// Wall time on a shared machine swings with others' load; the
			// thread's own CPU time per op is reported too.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			cpu0 := threadCPU()
			for b.Loop() {
				frame, err := enc.Encode(KindOutputs, batch)
				if err != nil {
					b.Fatal(err)
				}
				if err := dec.DecodeInto(frame, &into); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(threadCPU()-cpu0)/float64(b.N), "cpu-ns/op")
			frame, _ := enc.Encode(KindOutputs, batch)
			b.ReportMetric(float64(len(frame)), "bytes/batch")
		})
	}
}

// threadCPU returns the calling OS thread's CPU time in nanoseconds.
func threadCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// TestDecodeOutputsKeepsNoView: a decoded batch holds no view of the frame
// (the frontend decodes straight from memory it hands back right after:
// zmqtransport's pump slots). Overwriting the frame after decoding, also
// into a reused batch and with the interning table warm, changes nothing.
func TestDecodeOutputsKeepsNoView(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	c := NewCodec()
	var reused Outputs
	for iter := 0; iter < 200; iter++ {
		var want *Outputs
		for _, m := range randMessages(r) {
			if m.kind == KindOutputs {
				want = m.msg.(*Outputs)
			}
		}
		frame, err := c.Encode(KindOutputs, want)
		if err != nil {
			t.Fatal(err)
		}
		frame = bytes.Clone(frame)
		for _, got := range []*Outputs{{}, &reused} {
			if err := c.DecodeInto(frame, got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(normalize(got), normalize(want)) {
				t.Fatalf("decode: got %+v\nwant %+v", normalize(got), normalize(want))
			}
			scratch := bytes.Clone(frame)
			for i := range frame {
				frame[i] = 0xA5
			}
			if !reflect.DeepEqual(normalize(got), normalize(want)) { // want shares nothing with frame
				t.Fatalf("iteration %d: the decoded batch changed with the frame's bytes", iter)
			}
			copy(frame, scratch)
		}
	}
}
