package reliability

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluice-llm/sluice/api-frontend/engineclient"
	"github.com/sluice-llm/sluice/api-frontend/server"
	"github.com/sluice-llm/sluice/ipc"
	"github.com/sluice-llm/sluice/modelfile/demo"
	"github.com/sluice-llm/sluice/text/tokenizer"
)

// quickEngine is an in-process engine.Transport that finishes every request
// after at most 4 tokens, one token per request per 1 ms step.
type quickEngine struct {
	mu      sync.Mutex
	ready   ipc.Ready
	reqs    map[string]*ipc.AddRequest
	n       map[string]int
	outputs chan *ipc.Outputs
	events  chan engineclient.Event
	quit    chan struct{}
	done    chan struct{}
	once    sync.Once
}

func newQuickEngine(vocab int) *quickEngine {
	e := &quickEngine{
		ready:   ipc.Ready{ProtocolVersion: ipc.ProtocolVersion, EngineID: "quick", ModelName: "demo", MaxModelLen: 2048, VocabSize: vocab, EOSTokenIDs: []int32{2}, BlockSize: 16, NumKVBlocks: 1024},
		reqs:    map[string]*ipc.AddRequest{},
		n:       map[string]int{},
		outputs: make(chan *ipc.Outputs, 16),
		events:  make(chan engineclient.Event, 4),
		quit:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	go e.loop()
	return e
}

func (e *quickEngine) loop() {
	defer close(e.done)
	defer close(e.outputs)
	tk := time.NewTicker(time.Millisecond)
	defer tk.Stop()
	step := uint64(0)
	for {
		select {
		case <-e.quit:
			return
		case <-tk.C:
		}
		e.mu.Lock()
		if len(e.reqs) == 0 {
			e.mu.Unlock()
			continue
		}
		step++
		b := &ipc.Outputs{EngineID: "quick", Step: step, Stats: &ipc.SchedulerStats{Running: int32(len(e.reqs))}}
		for id, r := range e.reqs {
			e.n[id]++
			o := ipc.Output{RequestID: id, NewTokenIDs: []int32{int32(10 + e.n[id])}, StopReason: -1}
			if r.Params.Logprobs >= 0 {
				o.Logprobs = []ipc.TokenLogprobs{{Logprob: -0.1, Rank: 1}}
			}
			if e.n[id] >= 4 || (r.Params.MaxTokens > 0 && e.n[id] >= int(r.Params.MaxTokens)) {
				o.FinishReason = ipc.FinishLength
				delete(e.reqs, id)
				delete(e.n, id)
			}
			b.Outputs = append(b.Outputs, o)
		}
		e.mu.Unlock()
		select {
		case e.outputs <- b:
		case <-e.quit:
			return
		}
	}
}

func (e *quickEngine) Send(kind ipc.Kind, msg any) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch kind {
	case ipc.KindAdd:
		r := msg.(*ipc.AddRequest)
		e.reqs[r.RequestID] = r
	case ipc.KindAbort:
		for _, id := range msg.(*ipc.Abort).RequestIDs {
			delete(e.reqs, id)
			delete(e.n, id)
		}
	default:
		return errors.New("quickEngine: unexpected frame")
	}
	return nil
}

func (e *quickEngine) Outputs() <-chan *ipc.Outputs      { return e.outputs }
func (e *quickEngine) Events() <-chan engineclient.Event { return e.events }
func (e *quickEngine) Ready() (ipc.Ready, bool)          { return e.ready, true }
func (e *quickEngine) Call(string, []byte, time.Duration) (*ipc.UtilityResult, error) {
	return &ipc.UtilityResult{}, nil
}
func (e *quickEngine) Close() {
	e.once.Do(func() { close(e.quit); <-e.done; close(e.events) })
}

// inProcess is the real HTTP handler over the quick engine and the demo
// model's tokenizer.
type inProcess struct {
	ts     *httptest.Server
	hc     *http.Client
	client *engineclient.Client
}

func newInProcess(tb testing.TB) *inProcess {
	tb.Helper()
	dir, err := demo.EnsureCached("tiny", 0)
	if err != nil {
		tb.Fatalf("demo model: %v", err)
	}
	tok, err := tokenizer.Load(dir, "")
	if err != nil {
		tb.Fatalf("demo tokenizer: %v", err)
	}
	eng := newQuickEngine(tok.VocabSize())
	c := engineclient.New([]engineclient.Transport{eng}, engineclient.Options{})
	c.Start()
	srv := server.New(server.Config{ServedModelNames: []string{"demo"}, MaxBodyBytes: 1 << 20}, server.Deps{Engines: c, Tokenizer: tok})
	ts := httptest.NewServer(srv.Handler())
	return &inProcess{ts: ts, hc: ts.Client(), client: c}
}

// close stops the HTTP server and the engine client.
func (p *inProcess) close() {
	p.ts.Close()
	p.client.Close()
}

// serve runs one request through the handler and checks the invariants:
// never a 5xx; an error status carries an OpenAI error JSON; a 200 is JSON
// or a stream that ends with [DONE].
func (p *inProcess) serve(tb testing.TB, path string, body []byte) int {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.ts.URL+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.hc.Do(req)
	if err != nil {
		tb.Errorf("%s %q: %v", path, tail(string(body), 300), err)
		return 0
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Errorf("%s %q: read: %v", path, tail(string(body), 300), err)
		return 0
	}
	rec := struct {
		Code int
		hdr  http.Header
	}{resp.StatusCode, resp.Header}
	switch {
	case rec.Code >= 500:
		tb.Errorf("%s %q: %d %s", path, tail(string(body), 300), rec.Code, tail(string(b), 300))
	case rec.Code >= 400:
		if err := checkErrorJSON(b); err != nil {
			tb.Errorf("%s %q: %d: %v", path, tail(string(body), 300), rec.Code, err)
		}
	case rec.Code == http.StatusOK:
		if strings.HasPrefix(rec.hdr.Get("Content-Type"), "text/event-stream") {
			if !bytes.HasSuffix(bytes.TrimSpace(b), []byte("data: [DONE]")) {
				tb.Errorf("%s %q: stream does not end with [DONE]: %q", path, tail(string(body), 300), tail(string(b), 300))
			}
		} else if !json.Valid(b) {
			tb.Errorf("%s %q: 200 with invalid JSON %q", path, tail(string(body), 300), tail(string(b), 300))
		}
	}
	return rec.Code
}

var fuzzPaths = []string{"/v1/completions", "/v1/chat/completions", "/tokenize", "/detokenize"}

// FuzzRequest feeds arbitrary bodies to the real HTTP handler (request
// decoding, validation, chat templating, tokenization, generation against
// an in-process engine): never a 5xx or a panic, errors are OpenAI JSON.
func FuzzRequest(f *testing.F) {
	for _, tc := range hostileHTTPCorpus() {
		if len(tc.body) < 4096 && tc.method == "" {
			for i, p := range fuzzPaths {
				if p == tc.path {
					f.Add(uint8(i), []byte(tc.body))
				}
			}
		}
	}
	f.Add(uint8(0), []byte(`{"prompt":"hi","max_tokens":3,"stream":true,"logprobs":2,"stream_options":{"include_usage":true}}`))
	f.Add(uint8(0), []byte(`{"prompt":[[1,2],[3]],"n":2,"echo":true,"stop":["a"]}`))
	f.Add(uint8(1), []byte(`{"messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"hi"}]}],"stream":true,"max_completion_tokens":2,"response_format":{"type":"json_object"}}`))
	f.Add(uint8(1), []byte(`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":{"type":"function","function":{"name":"f"}}}`))
	f.Add(uint8(2), []byte(`{"messages":[{"role":"user","content":"hi"}],"add_generation_prompt":true}`))
	f.Add(uint8(3), []byte(`{"tokens":[1,2,3]}`))
	p := newInProcess(f)
	f.Cleanup(p.close)
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		p.serve(t, fuzzPaths[int(route)%len(fuzzPaths)], body)
	})
}

// TestInProcessNoLeaks runs the hostile corpus and valid streams through the
// real handler and checks that closing the engine client leaves no
// goroutine behind (goleak).
func TestInProcessNoLeaks(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	p := newInProcess(t)
	n := 0
	for _, tc := range hostileHTTPCorpus() {
		if tc.method != "" || tc.contentType != "" {
			continue
		}
		p.serve(t, tc.path, []byte(tc.body))
		n++
	}
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			body := `{"prompt":"leak check","max_tokens":4,"stream":true}`
			if i%2 == 1 {
				body = `{"messages":[{"role":"user","content":"leak check"}],"max_tokens":4,"stream":true}`
				p.serve(t, "/v1/chat/completions", []byte(body))
				return
			}
			p.serve(t, "/v1/completions", []byte(body))
		}(i)
	}
	wg.Wait()
	p.close()
	t.Logf("%d hostile bodies and 50 streams in process", n)
}
