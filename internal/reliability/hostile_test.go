package reliability

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	zmq "github.com/pebbe/zmq4"

	"github.com/sluice-llm/sluice/internal/testproc"
	"github.com/sluice-llm/sluice/ipc"
)

// httpCase is one hostile HTTP request.
type httpCase struct {
	name        string
	method      string
	path        string
	contentType string
	body        string
	allowOK     bool // a lenient 200 is acceptable (the input is valid after all)
	want        int  // exact status wanted (0: any 4xx)
}

func nested(depth int) string {
	return strings.Repeat(`{"a":`, depth) + "1" + strings.Repeat("}", depth)
}

func hostileHTTPCorpus() []httpCase {
	const C, H = "/v1/completions", "/v1/chat/completions"
	big := strings.Repeat("x", 10<<20)
	cases := []httpCase{
		{name: "empty", path: C, body: ""},
		{name: "truncated json", path: C, body: `{"prompt":"hi","max_tokens":`},
		{name: "trailing garbage", path: C, body: `{"prompt":"hi"} xyz`},
		{name: "json array", path: C, body: `[{"prompt":"hi"}]`},
		{name: "json null", path: C, body: `null`},
		{name: "binary", path: C, body: "\x00\x01\x02\xff\xfe"},
		{name: "NaN literal", path: C, body: `{"prompt":"hi","temperature":NaN}`},
		{name: "Infinity literal", path: C, body: `{"prompt":"hi","temperature":Infinity}`},
		{name: "NaN string", path: C, body: `{"prompt":"hi","temperature":"NaN"}`},
		{name: "huge float", path: C, body: `{"prompt":"hi","temperature":1e400}`},
		{name: "huge max_tokens", path: C, body: `{"prompt":"hi","max_tokens":99999999999999999999999}`},
		{name: "max_tokens 2^31", path: C, body: `{"prompt":"hi","max_tokens":2147483648}`},
		{name: "max_tokens 2^63-1", path: C, body: `{"prompt":"hi","max_tokens":9223372036854775807}`},
		{name: "negative max_tokens", path: C, body: `{"prompt":"hi","max_tokens":-1}`},
		{name: "huge n", path: C, body: `{"prompt":"hi","n":1000000000}`},
		{name: "negative n", path: C, body: `{"prompt":"hi","n":-3}`},
		{name: "huge seed", path: C, body: `{"prompt":"hi","seed":1e30}`},
		{name: "negative top_k", path: C, body: `{"prompt":"hi","top_k":-100}`},
		{name: "huge logprobs", path: C, body: `{"prompt":"hi","logprobs":1000000}`},
		{name: "stream_interval huge", path: C, body: `{"prompt":"hi","stream":true,"stream_interval":9223372036854775807}`, allowOK: true},
		{name: "stream_interval negative", path: C, body: `{"prompt":"hi","stream":true,"stream_interval":-1}`},
		{name: "deep nesting 100k", path: C, body: `{"prompt":"hi","x":` + nested(100000) + `}`},
		{name: "deep arrays 100k", path: C, body: `{"prompt":` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `}`},
		{name: "deep nesting in messages", path: H, body: `{"messages":[{"role":"user","content":` + nested(50000) + `}]}`},
		{name: "10 MB prompt", path: C, body: `{"prompt":"` + big + `"}`},
		{name: "10 MB unknown field", path: C, body: `{"prompt":"hi","junk":"` + big + `","max_tokens":-1}`},
		{name: "invalid UTF-8 in prompt", path: C, body: "{\"prompt\":\"\xff\xfe\xc3\x28 hi\",\"max_tokens\":2}", allowOK: true},
		{name: "invalid UTF-8 in key", path: C, body: "{\"\xff\xfe\":1,\"prompt\":\"hi\",\"max_tokens\":2}", allowOK: true},
		{name: "invalid UTF-8 in model", path: C, body: "{\"model\":\"\xff\",\"prompt\":\"hi\"}", want: http.StatusNotFound},
		{name: "lone surrogate escape", path: C, body: `{"prompt":"\ud800\udfff\ud800","max_tokens":2}`, allowOK: true},
		{name: "NUL bytes in prompt", path: C, body: `{"prompt":"a\u0000b","max_tokens":2}`, allowOK: true},
		{name: "prompt ids out of vocab", path: C, body: `{"prompt":[1,2,999999]}`},
		{name: "prompt ids negative", path: C, body: `{"prompt":[-1]}`},
		{name: "prompt ids int64", path: C, body: `{"prompt":[9223372036854775807]}`},
		{name: "prompt ids beyond int64", path: C, body: `{"prompt":[99999999999999999999]}`},
		{name: "prompt ids floats", path: C, body: `{"prompt":[1.5,2]}`},
		{name: "prompt 200k ids", path: C, body: `{"prompt":[` + strings.Repeat("1,", 200000) + `1]}`},
		{name: "10k prompts", path: C, body: `{"prompt":[` + strings.Repeat(`"a",`, 10000) + `"a"],"max_tokens":1}`, allowOK: true},
		{name: "stop 100k strings", path: C, body: `{"prompt":"hi","stop":[` + strings.Repeat(`"a",`, 100000) + `"a"]}`, allowOK: true},
		{name: "stop_token_ids out of vocab", path: C, body: `{"prompt":"hi","stop_token_ids":[-5,99999999]}`},
		{name: "logit_bias 100k entries", path: C, body: `{"prompt":"hi","logit_bias":{` + logitBias(100000) + `}}`},
		{name: "logit_bias NaN-ish", path: C, body: `{"prompt":"hi","logit_bias":{"1":1e400}}`},
		{name: "chat no messages", path: H, body: `{"model":"demo"}`},
		{name: "chat 100k messages", path: H, body: `{"messages":[` + strings.Repeat(`{"role":"user","content":"a"},`, 100000) + `{"role":"user","content":"a"}]}`},
		{name: "chat bad role", path: H, body: `{"messages":[{"role":"root","content":"hi"}]}`},
		{name: "chat content object", path: H, body: `{"messages":[{"role":"user","content":{"evil":true}}]}`},
		{name: "chat tools garbage", path: H, body: `{"messages":[{"role":"user","content":"hi"}],"tools":[1,2,3]}`},
		{name: "chat template kwargs injection", path: H, body: `{"messages":[{"role":"user","content":"hi"}],"chat_template":"{{ 7*7 }}{% for i in range(999999999) %}x{% endfor %}"}`, allowOK: true},
		{name: "model path traversal", path: C, body: `{"model":"/etc/passwd","prompt":"hi"}`, want: http.StatusNotFound},
		{name: "model relative path", path: C, body: `{"model":"../../../../etc/shadow","prompt":"hi"}`, want: http.StatusNotFound},
		{name: "tokenize garbage", path: "/tokenize", body: `{"prompt":5}`},
		{name: "detokenize out of vocab", path: "/detokenize", body: `{"tokens":[-1,99999999]}`},
		{name: "detokenize huge", path: "/detokenize", body: `{"tokens":[1e400]}`},
		{name: "GET on completions", method: http.MethodGet, path: C, want: http.StatusMethodNotAllowed},
		{name: "DELETE on chat", method: http.MethodDelete, path: H, want: http.StatusMethodNotAllowed},
		{name: "unknown route", path: "/v1/engines/../../etc/passwd", body: `{}`, want: http.StatusNotFound},
		{name: "text/plain json", path: C, contentType: "text/plain", body: `{"prompt":"hi","max_tokens":2}`, allowOK: true},
		{name: "form encoded", path: C, contentType: "application/x-www-form-urlencoded", body: `prompt=hi&max_tokens=2`},
		{name: "multipart", path: C, contentType: "multipart/form-data; boundary=x", body: "--x\r\nContent-Disposition: form-data; name=\"prompt\"\r\n\r\nhi\r\n--x--\r\n"},
		{name: "xml", path: C, contentType: "application/xml", body: `<prompt>hi</prompt>`},
	}
	cases = append(cases, hostileAgentCorpus()...)
	return cases
}

// hostileAgentCorpus is malformed input for /v1/responses and
// /v1/messages: each gets a 4xx in its API's own error shape.
func hostileAgentCorpus() []httpCase {
	const R, M, T = "/v1/responses", "/v1/messages", "/v1/messages/count_tokens"
	return []httpCase{
		{name: "responses empty", path: R, body: ""},
		{name: "responses array", path: R, body: `[1]`},
		{name: "responses no input", path: R, body: `{"model":"demo"}`},
		{name: "responses input number", path: R, body: `{"input":5}`},
		{name: "responses item not object", path: R, body: `{"input":[1,2]}`},
		{name: "responses bad role", path: R, body: `{"input":[{"type":"message","role":"robot","content":"x"}]}`},
		{name: "responses image", path: R, body: `{"input":[{"role":"user","content":[{"type":"input_image","image_url":"http://x"}]}]}`},
		{name: "responses orphan output", path: R, body: `{"input":[{"type":"function_call_output","call_id":"c1","output":"x"}]}`},
		{name: "responses call without name", path: R, body: `{"input":[{"type":"function_call","call_id":"c1","arguments":"{}"}]}`},
		{name: "responses unknown tool_choice", path: R, body: `{"input":"x","tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"function","name":"g"}}`},
		{name: "responses tool_choice garbage", path: R, body: `{"input":"x","tool_choice":"sometimes"}`},
		{name: "responses tools not objects", path: R, body: `{"input":"x","tools":[1]}`},
		{name: "responses max_output_tokens 0", path: R, body: `{"input":"x","max_output_tokens":0}`},
		{name: "responses temperature string", path: R, body: `{"input":"x","temperature":"hot"}`},
		{name: "responses metadata not strings", path: R, body: `{"input":"x","metadata":{"a":1}}`},
		{name: "responses bad format", path: R, body: `{"input":"x","text":{"format":{"type":"yaml"}}}`},
		{name: "responses schema missing", path: R, body: `{"input":"x","text":{"format":{"type":"json_schema","name":"s"}}}`},
		{name: "responses unknown previous", path: R, body: `{"input":"x","previous_response_id":"resp_nope"}`, want: http.StatusNotFound},
		{name: "responses bad encrypted reasoning", path: R, body: `{"input":[{"type":"reasoning","encrypted_content":"forged"},{"role":"user","content":"x"}]}`},
		{name: "responses truncation", path: R, body: `{"input":"x","truncation":"sideways"}`},
		{name: "responses deep nesting", path: R, body: `{"input":"x","metadata":` + nested(10000) + `}`},
		{name: "responses get unknown", method: http.MethodGet, path: R + "/resp_nope", want: http.StatusNotFound},
		{name: "responses delete unknown", method: http.MethodDelete, path: R + "/resp_nope", want: http.StatusNotFound},
		{name: "messages empty", path: M, body: ""},
		{name: "messages no max_tokens", path: M, body: `{"model":"demo","messages":[{"role":"user","content":"hi"}]}`},
		{name: "messages max_tokens 0", path: M, body: `{"max_tokens":0,"messages":[{"role":"user","content":"hi"}]}`},
		{name: "messages max_tokens string", path: M, body: `{"max_tokens":"10","messages":[{"role":"user","content":"hi"}]}`},
		{name: "messages none", path: M, body: `{"max_tokens":10,"messages":[]}`},
		{name: "messages bad role", path: M, body: `{"max_tokens":10,"messages":[{"role":"system","content":"hi"}]}`},
		{name: "messages content number", path: M, body: `{"max_tokens":10,"messages":[{"role":"user","content":7}]}`},
		{name: "messages block without type", path: M, body: `{"max_tokens":10,"messages":[{"role":"user","content":[{"text":"hi"}]}]}`},
		{name: "messages orphan tool_result", path: M, body: `{"max_tokens":10,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_x","content":"1"}]}]}`},
		{name: "messages tool_use from user", path: M, body: `{"max_tokens":10,"messages":[{"role":"user","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]}]}`},
		{name: "messages tool_use input array", path: M, body: `{"max_tokens":10,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":[1]}]}]}`},
		{name: "messages unknown tool_choice", path: M, body: `{"max_tokens":10,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool","name":"g"}}`},
		{name: "messages tool without schema", path: M, body: `{"max_tokens":10,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f"}]}`},
		{name: "messages thinking type", path: M, body: `{"max_tokens":10,"messages":[{"role":"user","content":"hi"}],"thinking":{"type":"maybe"}}`},
		{name: "messages system number", path: M, body: `{"max_tokens":10,"system":5,"messages":[{"role":"user","content":"hi"}]}`},
		{name: "messages image", path: M, body: `{"max_tokens":10,"messages":[{"role":"user","content":[{"type":"image","source":{}}]}]}`},
		{name: "messages deep nesting", path: M, body: `{"max_tokens":10,"metadata":` + nested(10000) + `,"messages":[{"role":"user","content":"hi"}]}`},
		{name: "count_tokens no messages", path: T, body: `{"model":"demo"}`},
		{name: "count_tokens garbage", path: T, body: `{"messages":"hi"`},
	}
}

func logitBias(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"%d":1`, i)
	}
	return b.String()
}

// checkErrorJSON checks an OpenAI error body.
func checkErrorJSON(b []byte) error {
	var e struct {
		Error *struct {
			Message string `json:"message"`
			Type    string `json:"type"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &e); err != nil || e.Error == nil || e.Error.Message == "" {
		return fmt.Errorf("not an error JSON: %q", tail(string(b), 200))
	}
	return nil
}

// TestHostileHTTP: malformed requests get 4xx with an OpenAI error body,
// never a 5xx; the server stays up and keeps serving.
func TestHostileHTTP(t *testing.T) {
	addr := engineAddr(t)
	eng := startEngine(t, addr, "--sim-step-ms", "1")
	fe := startFrontend(t, addr)
	tried := 0
	// cost is the CPU time the frontend and the engine have used: each
	// hostile request is bounded by what it costs them, not by wall time,
	// which on a shared machine also counts the wait for a CPU.
	cost := func() time.Duration {
		a, err := testproc.CPUTime(fe.Pid())
		if err != nil {
			t.Fatal(err)
		}
		b, err := testproc.CPUTime(eng.Pid())
		if err != nil {
			t.Fatal(err)
		}
		return a + b
	}
	for _, tc := range hostileHTTPCorpus() {
		method := tc.method
		if method == "" {
			method = http.MethodPost
		}
		ct := tc.contentType
		if ct == "" {
			ct = "application/json"
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		req, _ := http.NewRequestWithContext(ctx, method, fe.base+tc.path, strings.NewReader(tc.body))
		req.Header.Set("Content-Type", ct)
		c0 := cost()
		resp, err := client.Do(req)
		if err != nil {
			cancel()
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		tried++
		took := cost() - c0
		switch {
		case resp.StatusCode >= 500:
			t.Errorf("%s: %d %s", tc.name, resp.StatusCode, tail(string(b), 300))
		case resp.StatusCode == http.StatusOK && tc.allowOK:
			if !json.Valid(b) && !strings.HasPrefix(string(b), "data: ") {
				t.Errorf("%s: 200 with an invalid body %q", tc.name, tail(string(b), 200))
			}
		case tc.want != 0 && resp.StatusCode != tc.want:
			t.Errorf("%s: status %d, want %d: %s", tc.name, resp.StatusCode, tc.want, tail(string(b), 300))
		case resp.StatusCode < 400 || resp.StatusCode > 499:
			t.Errorf("%s: status %d, want 4xx: %s", tc.name, resp.StatusCode, tail(string(b), 300))
		default:
			if err := checkErrorJSON(b); err != nil {
				t.Errorf("%s: %d: %v", tc.name, resp.StatusCode, err)
			}
		}
		if took > 10*time.Second {
			t.Errorf("%s: cost the frontend and engine %s of CPU time", tc.name, took)
		}
		if took > 2*time.Second {
			t.Logf("%s: %s of CPU time", tc.name, took)
		}
	}
	raw := rawHTTPCorpus()
	for _, rc := range raw {
		status, err := rawRequest(fe.base, rc.data)
		tried++
		if err != nil {
			t.Errorf("raw %s: %v", rc.name, err)
			continue
		}
		switch {
		case rc.allowOK && status == http.StatusOK:
		case rc.want != 0 && status != rc.want:
			t.Errorf("raw %s: status %d, want %d", rc.name, status, rc.want)
		case rc.want == 0 && status != 0 && (status < 400 || status > 499):
			t.Errorf("raw %s: status %d, want 4xx (or a closed connection)", rc.name, status)
		}
	}
	if !fe.Alive() {
		t.Fatal("frontend died")
	}
	if code, _ := healthCode(fe.base); code != http.StatusOK {
		t.Fatalf("/health %d after the corpus", code)
	}
	checkServes(t, fe.base)
	if out := fe.Output(); strings.Contains(out, "panic") {
		t.Errorf("frontend logged a panic: %s", tail(out, 2000))
	}
	t.Logf("%d hostile HTTP requests, server up", tried)
	record(t, "bad HTTP inputs tried", tried)
}

// rawCase is a hand-written HTTP request sent on a raw connection.
type rawCase struct {
	name    string
	data    string
	allowOK bool // a 200 is acceptable (the request is valid)
	want    int  // exact status wanted (0: any 4xx, or a closed connection)
}

func rawHTTPCorpus() []rawCase {
	body := `{"prompt":"hi","max_tokens":2}`
	huge := `{"prompt":"` + strings.Repeat("y", 40<<20) + `"}`
	return []rawCase{
		{name: "not http", data: "GARBAGE\r\n\r\n"},
		{name: "binary", data: "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n"},
		{name: "CL and TE", data: "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
		{name: "bad chunked", data: "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n"},
		{name: "negative CL", data: "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n"},
		{name: "two CL", data: "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}"},
		{name: "40 MB body", data: "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " + fmt.Sprint(len(huge)) + "\r\n\r\n" + huge, want: http.StatusRequestEntityTooLarge},
		{name: "2 MB header", data: "GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 2<<20) + "\r\n\r\n", want: http.StatusRequestHeaderFieldsTooLarge},
		{name: "10k headers", data: "GET /health HTTP/1.1\r\nHost: x\r\n" + strings.Repeat("X-A: b\r\n", 10000) + "\r\n", allowOK: true},
		{name: "no host", data: "POST /v1/completions HTTP/1.1\r\nContent-Length: " + fmt.Sprint(len(body)) + "\r\n\r\n" + body},
		{name: "bad method", data: "PO\x00ST /v1/completions HTTP/1.1\r\nHost: x\r\n\r\n"},
		// net/http's own answer to an unknown major version is 505.
		{name: "bad version", data: "POST /v1/completions HTTP/9.9\r\nHost: x\r\n\r\n", want: http.StatusHTTPVersionNotSupported},
		{name: "absolute URI elsewhere", data: "GET http://169.254.169.254/latest/meta-data HTTP/1.1\r\nHost: 169.254.169.254\r\n\r\n"},
		{name: "path with NUL", data: "GET /v1/models%00 HTTP/1.1\r\nHost: x\r\n\r\n"},
		{name: "http/1.0", data: "POST /v1/completions HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: " + fmt.Sprint(len(body)) + "\r\n\r\n" + body, allowOK: true},
	}
}

// rawRequest sends data on a fresh connection and returns the response
// status, or 0 when the server closed the connection without one.
func rawRequest(base, data string) (int, error) {
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(base, "http://"), 5*time.Second)
	if err != nil {
		return 0, fmt.Errorf("dial: %w", err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if tc, ok := c.(*net.TCPConn); ok {
		go func() { _, _ = tc.Write([]byte(data)) }()
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return 0, fmt.Errorf("no answer within 10 s")
		}
		return 0, nil // closed without a response
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	return resp.StatusCode, nil
}

// rogue is a raw DEALER on the engine socket.
type rogue struct {
	ctx  *zmq.Context
	sock *zmq.Socket
}

func newRogue(t *testing.T, addr, identity string) *rogue {
	t.Helper()
	ctx, err := zmq.NewContext()
	if err != nil {
		t.Fatal(err)
	}
	s, err := ctx.NewSocket(zmq.DEALER)
	if err != nil {
		t.Fatal(err)
	}
	_ = s.SetIdentity(identity)
	_ = s.SetLinger(0)
	_ = s.SetRcvtimeo(3 * time.Second)
	_ = s.SetSndtimeo(3 * time.Second)
	if err := s.Connect(addr); err != nil {
		t.Fatal(err)
	}
	r := &rogue{ctx: ctx, sock: s}
	t.Cleanup(func() { _ = s.Close(); _ = ctx.Term() })
	time.Sleep(100 * time.Millisecond) // let the connection come up
	return r
}

func (r *rogue) send(t *testing.T, frames ...[]byte) {
	t.Helper()
	parts := make([]any, len(frames))
	for i, f := range frames {
		parts[i] = f
	}
	if _, err := r.sock.SendMessage(parts...); err != nil {
		t.Fatalf("rogue send: %v", err)
	}
}

// expect reads frames until one of kind arrives (or the timeout).
func (r *rogue) expect(kind ipc.Kind) ([]byte, error) {
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		f, err := r.sock.RecvBytes(0)
		if err != nil {
			return nil, fmt.Errorf("waiting for %s: %w", kind, err)
		}
		if len(f) > 0 && ipc.Kind(f[0]) == kind {
			return f, nil
		}
	}
	return nil, fmt.Errorf("no %s within 3 s", kind)
}

// progress counts the tokens generated for request id in the OUTPUTS
// frames that arrive within window.
func (r *rogue) progress(t *testing.T, id string, window time.Duration) int {
	t.Helper()
	n := 0
	codec := ipc.NewCodec()
	deadline := time.Now().Add(window)
	_ = r.sock.SetRcvtimeo(50 * time.Millisecond)
	defer func() { _ = r.sock.SetRcvtimeo(3 * time.Second) }()
	for time.Now().Before(deadline) {
		f, err := r.sock.RecvBytes(0)
		if err != nil || len(f) == 0 || ipc.Kind(f[0]) != ipc.KindOutputs {
			continue
		}
		var out ipc.Outputs
		if err := codec.DecodeInto(f, &out); err != nil {
			t.Fatalf("decode outputs: %v", err)
		}
		for _, o := range out.Outputs {
			if o.RequestID == id {
				n += len(o.NewTokenIDs)
			}
		}
	}
	return n
}

// finishes collects the final output of each request that finishes within
// window.
func (r *rogue) finishes(t *testing.T, window time.Duration, want int) map[string]ipc.Output {
	t.Helper()
	got := map[string]ipc.Output{}
	codec := ipc.NewCodec()
	deadline := time.Now().Add(window)
	_ = r.sock.SetRcvtimeo(50 * time.Millisecond)
	defer func() { _ = r.sock.SetRcvtimeo(3 * time.Second) }()
	for time.Now().Before(deadline) && len(got) < want {
		f, err := r.sock.RecvBytes(0)
		if err != nil || len(f) == 0 || ipc.Kind(f[0]) != ipc.KindOutputs {
			continue
		}
		var out ipc.Outputs
		if err := codec.DecodeInto(f, &out); err != nil {
			t.Fatalf("decode outputs: %v", err)
		}
		for _, o := range out.Outputs {
			if o.FinishReason != ipc.FinishNone {
				got[o.RequestID] = o
			}
		}
	}
	return got
}

func encode(t *testing.T, kind ipc.Kind, msg any) []byte {
	t.Helper()
	b, err := ipc.NewCodec().Encode(kind, msg)
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), b...)
}

// TestRoguePeer: garbage frames, huge frames, a valid HELLO followed by
// garbage, and syntactically valid but absurd requests on the engine socket
// never take the engine down, and the real frontend's stream completes.
func TestRoguePeer(t *testing.T) {
	// The cpu executor runs the real demo model: out-of-vocabulary ids there
	// would index real embedding tables.
	for _, ex := range []string{"sim", "cpu"} {
		t.Run(ex, func(t *testing.T) { roguePeer(t, ex) })
	}
}

func roguePeer(t *testing.T, executor string) {
	addr := engineAddr(t)
	var eng *proc
	if executor == "sim" {
		eng = startEngine(t, addr, "--sim-step-ms", "2")
	} else {
		eng = start(t, "engine-core", "--model", "demo", "--executor", "cpu", "--listen", addr, "--log-format", "console", "--served-model-name", "demo")
		waitFor(t, 60*time.Second, "cpu engine socket", func() (bool, string) {
			_, err := os.Stat(sockPath(addr))
			return err == nil && eng.Alive(), fmt.Sprint(err)
		})
	}
	fe := startFrontend(t, addr)
	obs := newObserver(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	resp, sse := openStream(t, ctx, fe.base, "/v1/completions", `{"model":"demo","prompt":"survive the rogue","max_tokens":1900,"ignore_eos":true,"stream":true,"stream_interval":16,"stream_options":{"include_usage":true}}`)
	defer resp.Body.Close()
	type result struct {
		evs []string
		err error
	}
	done := make(chan result, 1)
	go func() { evs, err := sse.all(); done <- result{evs, err} }()

	rng := rand.New(rand.NewPCG(1, 2))
	garbage := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		return b
	}
	hello := func(id string, version int) []byte {
		return encode(t, ipc.KindHello, &ipc.Hello{ProtocolVersion: version, FrontendID: id, PID: 4242, ModelName: ""})
	}
	attacks := 0
	attack := func(name string, f func()) {
		f()
		attacks++
		if !eng.Alive() {
			t.Fatalf("engine died after %q: %s", name, tail(eng.Output(), 2000))
		}
	}

	// A valid session with a running request, then garbage: the peer is
	// dropped and its request aborted (its KV freed).
	r2 := newRogue(t, addr, "rogue-session")
	r2.send(t, hello("rogue-session", ipc.ProtocolVersion))
	if _, err := r2.expect(ipc.KindReady); err != nil {
		t.Fatalf("rogue HELLO: %v", err)
	}
	r2.send(t, encode(t, ipc.KindAdd, &ipc.AddRequest{RequestID: "rogue-long", PromptTokenIDs: []int32{5, 6, 7}, Params: ipc.SamplingParams{MaxTokens: 1500, IgnoreEOS: true, Logprobs: -1}}))
	if n := r2.progress(t, "rogue-long", 500*time.Millisecond); n == 0 {
		t.Fatal("rogue session's request produces no outputs")
	}
	attack("garbage after HELLO", func() { r2.send(t, garbage(300)) })
	if _, err := r2.expect(ipc.KindReject); err != nil {
		t.Errorf("garbage after HELLO: %v", err)
	}
	// A new session of the same peer gets nothing more of the old request.
	r2.send(t, hello("rogue-session", ipc.ProtocolVersion))
	if _, err := r2.expect(ipc.KindReady); err != nil {
		t.Fatalf("rogue HELLO again: %v", err)
	}
	// Outputs already in flight when the peer was dropped may still
	// arrive (they travel on another goroutine than REJECT); drain them,
	// then a live request would make hundreds of tokens in 500 ms.
	time.Sleep(time.Second)
	r2.progress(t, "rogue-long", 200*time.Millisecond)
	if n := r2.progress(t, "rogue-long", 500*time.Millisecond); n != 0 {
		t.Errorf("dropped peer's request still generating: %d tokens in 500 ms", n)
	}

	// Unknown peers sending garbage are refused.
	r1 := newRogue(t, addr, "rogue-garbage")
	for i := 0; i < 50; i++ {
		attack("garbage", func() { r1.send(t, garbage(1+rng.IntN(4096))) })
	}
	attack("empty frame", func() { r1.send(t, []byte{}) })
	attack("kind only", func() { r1.send(t, []byte{byte(ipc.KindAdd)}) })
	attack("multipart", func() { r1.send(t, []byte{1}, []byte{2}, []byte{3}) })
	if _, err := r1.expect(ipc.KindReject); err != nil {
		t.Errorf("garbage from an unknown peer: %v", err)
	}
	attack("huge frame", func() { r1.send(t, append([]byte{byte(ipc.KindAdd)}, garbage(64<<20)...)) })
	attack("bad version", func() {
		r := newRogue(t, addr, "rogue-version")
		r.send(t, hello("rogue-version", 999))
		if f, err := r.expect(ipc.KindReject); err != nil || !strings.Contains(string(f), "version") {
			t.Errorf("HELLO with protocol 999: %q %v", f, err)
		}
	})

	// Valid frames with absurd contents from a session.
	r3 := newRogue(t, addr, "rogue-absurd")
	r3.send(t, hello("rogue-absurd", ipc.ProtocolVersion))
	if _, err := r3.expect(ipc.KindReady); err != nil {
		t.Fatalf("rogue HELLO: %v", err)
	}
	longPrompt := make([]int32, 100000)
	adds := []ipc.AddRequest{
		{RequestID: "oov", PromptTokenIDs: []int32{1, 2, 1 << 30}, Params: ipc.SamplingParams{MaxTokens: 4, Logprobs: -1}},
		{RequestID: "negative", PromptTokenIDs: []int32{-1, -2147483648}, Params: ipc.SamplingParams{MaxTokens: 4, Logprobs: -1}},
		{RequestID: "empty", Params: ipc.SamplingParams{MaxTokens: 4, Logprobs: -1}},
		{RequestID: "too long", PromptTokenIDs: longPrompt, Params: ipc.SamplingParams{MaxTokens: 4, Logprobs: -1}},
		{RequestID: "max tokens", PromptTokenIDs: []int32{1}, Params: ipc.SamplingParams{MaxTokens: 2147483647, MinTokens: -5, Logprobs: -1}},
		{RequestID: "negative max", PromptTokenIDs: []int32{1}, Params: ipc.SamplingParams{MaxTokens: -7, Logprobs: -1}},
		{RequestID: "logprobs", PromptTokenIDs: []int32{1}, Params: ipc.SamplingParams{MaxTokens: 2, Logprobs: 1 << 30}},
		{RequestID: "params", PromptTokenIDs: []int32{1}, Params: ipc.SamplingParams{MaxTokens: 3, Temperature: -1, TopP: -3, TopK: -9, MinP: 7, RepetitionPenalty: -1, Logprobs: -1,
			StopTokenIDs: []int32{-1, 1 << 30}, LogitBias: []ipc.LogitBias{{Token: 1 << 30, Bias: 1e30}, {Token: -4, Bias: -1e30}},
			AllowedTokenIDs: []int32{-1, 1 << 30}, BadWords: [][]int32{{}, {-1}, {1 << 30}}}},
		{RequestID: "constraint", PromptTokenIDs: []int32{1}, Params: ipc.SamplingParams{MaxTokens: 3, Logprobs: -1, Constraint: &ipc.Constraint{Kind: "regex", Spec: "((((((a*)*)*)*)*)*)*["}}},
		{RequestID: "constraint kind", PromptTokenIDs: []int32{1}, Params: ipc.SamplingParams{MaxTokens: 3, Logprobs: -1, Constraint: &ipc.Constraint{Kind: "nonsense", Spec: "{"}}},
		{RequestID: "dup", PromptTokenIDs: []int32{1}, Params: ipc.SamplingParams{MaxTokens: 50, Logprobs: -1}},
		{RequestID: "dup", PromptTokenIDs: []int32{1}, Params: ipc.SamplingParams{MaxTokens: 50, Logprobs: -1}},
	}
	for i := range adds {
		attack("ADD "+adds[i].RequestID, func() { r3.send(t, encode(t, ipc.KindAdd, &adds[i])) })
	}
	// Each absurd request is refused or runs to a normal end; none hangs.
	ids := map[string]bool{}
	for _, a := range adds {
		ids[a.RequestID] = true
	}
	fins := r3.finishes(t, 5*time.Second, len(ids))
	for _, a := range adds {
		f, ok := fins[a.RequestID]
		if !ok {
			t.Errorf("absurd ADD %q: no finished output within 3 s", a.RequestID)
			continue
		}
		t.Logf("absurd ADD %-16q → finish %d %q", a.RequestID, f.FinishReason, f.Error)
	}
	attack("ABORT unknown", func() {
		r3.send(t, encode(t, ipc.KindAbort, &ipc.Abort{RequestIDs: []string{"nope", "", strings.Repeat("z", 1<<16)}}))
	})
	attack("UTILITY unknown", func() {
		r3.send(t, encode(t, ipc.KindUtility, &ipc.Utility{CallID: 1, Method: "rm -rf /", Args: garbage(100)}))
		if _, err := r3.expect(ipc.KindUtilityResult); err != nil {
			t.Errorf("unknown utility: %v", err)
		}
	})
	attack("frames the engine sends", func() {
		r3.send(t, encode(t, ipc.KindReady, &ipc.Ready{}))
		r3.send(t, encode(t, ipc.KindOutputs, &ipc.Outputs{EngineID: "fake", Outputs: []ipc.Output{{RequestID: "x"}}}))
		r3.send(t, encode(t, ipc.KindShutdown, &ipc.Shutdown{Reason: "bye"}))
	})
	attack("ping flood", func() {
		for i := 0; i < 20000; i++ {
			r3.send(t, encode(t, ipc.KindPing, &ipc.Ping{Time: float64(i)}))
		}
	})
	// Give the engine a moment to chew, then check it is alive and serving.
	time.Sleep(500 * time.Millisecond)
	if !eng.Alive() {
		t.Fatalf("engine died: %s", tail(eng.Output(), 3000))
	}
	var res result
	select {
	case res = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("real stream did not finish")
	}
	if res.err != nil {
		t.Fatal(res.err)
	}
	r, err := summarize(res.evs)
	if err != nil {
		t.Fatal(err)
	}
	if r.errAt >= 0 || r.usage != 1900 || r.finish != "length" || !r.done {
		t.Fatalf("real stream during the attack: error %q usage %d finish %q done %v", r.errMsg, r.usage, r.finish, r.done)
	}
	checkServes(t, fe.base)
	if _, err := obs.stats(); err != nil {
		t.Fatalf("engine stats after the attack: %v", err)
	}
	if out := eng.Output(); strings.Contains(out, "panic") {
		t.Errorf("engine logged a panic: %s", tail(out, 3000))
	}
	t.Logf("%d rogue frames/attacks survived", attacks)
	record(t, "rogue engine-socket attacks survived ("+executor+")", attacks)
}
