package openai

import "testing"

// BenchmarkDecodeValidate is the per-request decode and validation of a
// typical streamed completion request (FrontendCPU/split's body).
func BenchmarkDecodeValidate(b *testing.B) {
	body := []byte(`{"model":"demo","prompt":"Once upon a time there was a little girl who loved to play in the park with her friends. Once upon a time there","max_tokens":16,"ignore_eos":true,"stream":true}`)
	lim := Limits{VocabSize: 512, MaxModelLen: 2048, RequestLimits: RequestLimits{}.WithDefaults()}
	b.ReportAllocs()
	for b.Loop() {
		var req CompletionRequest
		if e := Decode(body, &req); e != nil {
			b.Fatal(e)
		}
		if _, e := req.Validate(lim); e != nil {
			b.Fatal(e)
		}
	}
}

// BenchmarkDecodeValidateChat is the same for a streamed chat request of
// one user message (FrontendCPU/split's body with SLUICE_BENCH_SPLIT_API=chat).
func BenchmarkDecodeValidateChat(b *testing.B) {
	body := []byte(`{"model":"demo","messages":[{"role":"user","content":"Once upon a time there was a little girl who loved to play in the park with her friends. Once upon a time there"}],"max_tokens":16,"ignore_eos":true,"stream":true}`)
	lim := Limits{VocabSize: 512, MaxModelLen: 2048, RequestLimits: RequestLimits{}.WithDefaults()}
	b.ReportAllocs()
	for b.Loop() {
		var req ChatRequest
		if e := Decode(body, &req); e != nil {
			b.Fatal(e)
		}
		if _, e := req.Validate(lim, ToolConfig{}); e != nil {
			b.Fatal(e)
		}
	}
}
