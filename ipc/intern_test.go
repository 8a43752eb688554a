package ipc

import (
	"fmt"
	"runtime"
	"testing"
)

// turnoverFrames encodes steps batches of live requests that each end
// after tokens outputs (the last with FinishLength) and are replaced by a
// new request the next step, as a frontend's short requests turn over;
// the requests start staggered so that live/tokens end every step.
func turnoverFrames(tb testing.TB, live, tokens, steps int) [][]byte {
	tb.Helper()
	enc := NewCodec()
	ids := make([]string, live)
	left := make([]int, live)
	next := 0
	newID := func() string { next++; return fmt.Sprintf("cmpl-%032x-0", next) }
	for i := range ids {
		ids[i], left[i] = newID(), 1+i%tokens
	}
	frames := make([][]byte, 0, steps)
	for s := 0; s < steps; s++ {
		o := &Outputs{EngineID: "engine-0", Step: uint64(s + 1)}
		for i := range ids {
			out := Output{RequestID: ids[i], NewTokenIDs: []int32{int32(s)}, StopReason: -1}
			if left[i]--; left[i] == 0 {
				out.FinishReason = FinishLength
			}
			o.Outputs = append(o.Outputs, out)
		}
		f, err := enc.Encode(KindOutputs, o)
		if err != nil {
			tb.Fatal(err)
		}
		frames = append(frames, append([]byte(nil), f...))
		for i := range ids {
			if left[i] == 0 {
				ids[i], left[i] = newID(), tokens
			}
		}
	}
	return frames
}

// TestInternKeepsLiveRequests: a request's id leaves the decoder's intern
// table with its last output, so the table holds the live requests, not
// every request seen since it was last cleared; decoding is unchanged.
func TestInternKeepsLiveRequests(t *testing.T) {
	for _, tc := range []struct{ live, tokens, steps int }{
		{256, 16, 200},
		{64, 2, 100},
		{8, 1, 10},
	} {
		t.Run(fmt.Sprintf("live=%d/tokens=%d", tc.live, tc.tokens), func(t *testing.T) {
			dec, plain := NewCodec(), NewCodec()
			var into Outputs
			for _, f := range turnoverFrames(t, tc.live, tc.tokens, tc.steps) {
				if err := dec.DecodeInto(f, &into); err != nil {
					t.Fatal(err)
				}
				finished := 0
				for _, o := range into.Outputs {
					if o.FinishReason != FinishNone {
						finished++
					}
				}
				// the engine's id and the requests that go on
				if want := 1 + len(into.Outputs) - finished; len(dec.intern) != want {
					t.Fatalf("step %d: %d interned ids, want %d", into.Step, len(dec.intern), want)
				}
				var want Outputs
				plain.intern = nil // plain strings
				if err := plain.DecodeInto(f, &want); err != nil || fmt.Sprint(want.Outputs) != fmt.Sprint(into.Outputs) {
					t.Fatalf("step %d: decoded %v, want %v (%v)", into.Step, into.Outputs, want.Outputs, err)
				}
			}
		})
	}
}

// BenchmarkDecodeTurnover decodes step batches of 256 live requests of 16
// tokens each (16 finish and 16 start every step), the split benchmark's
// short window as the frontend's decoder sees it.
func BenchmarkDecodeTurnover(b *testing.B) {
	frames := turnoverFrames(b, 256, 16, 2048)
	dec := NewCodec()
	var into Outputs
	b.ReportAllocs()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpu0, i := threadCPU(), 0
	for b.Loop() {
		if err := dec.DecodeInto(frames[i%len(frames)], &into); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(threadCPU()-cpu0)/float64(b.N)/256, "cpu-ns/output")
	b.ReportMetric(float64(len(dec.intern)), "interned")
}
