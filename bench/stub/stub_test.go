package stub

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func post(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestStreamShapes(t *testing.T) {
	srv := httptest.NewServer(New(Options{TokensPerChunk: 2, ReasoningChunks: 1}))
	defer srv.Close()
	_, chat := post(t, srv.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"a b c"}],"max_completion_tokens":3,"stream":true,"stream_options":{"include_usage":true}}`)
	want := `data: {"id":"chatcmpl-stub","object":"chat.completion.chunk","model":"stub-model","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}

data: {"id":"chatcmpl-stub","object":"chat.completion.chunk","model":"stub-model","choices":[{"index":0,"delta":{"reasoning":" tok tok"},"logprobs":null,"finish_reason":null}]}

data: {"id":"chatcmpl-stub","object":"chat.completion.chunk","model":"stub-model","choices":[{"index":0,"delta":{"content":" tok"},"logprobs":null,"finish_reason":"length"}]}

data: {"id":"stub","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":3,"total_tokens":6}}

data: [DONE]

`
	if chat != want {
		t.Errorf("chat stream:\n%s\nwant:\n%s", chat, want)
	}
	_, cmpl := post(t, srv.URL+"/v1/completions", `{"prompt":[5,6],"max_tokens":1,"stream":true}`)
	want = `data: {"id":"cmpl-stub","object":"text_completion","model":"stub-model","choices":[{"index":0,"text":" tok","logprobs":null,"finish_reason":"length"}]}

data: [DONE]

`
	if cmpl != want {
		t.Errorf("completions stream:\n%s\nwant:\n%s", cmpl, want)
	}
}

func TestFaults(t *testing.T) {
	kinds := []Fault{{Kind: HTTPError}, {Kind: StreamError, After: 1}, {Kind: Empty}}
	srv := httptest.NewServer(New(Options{Fault: func(i int) Fault { return kinds[i] }}))
	defer srv.Close()
	body := `{"prompt":"x","max_tokens":4,"stream":true}`
	if code, b := post(t, srv.URL+"/v1/completions", body); code != 500 || !strings.Contains(b, `"message":"stub: injected failure"`) {
		t.Errorf("HTTPError: %d %s", code, b)
	}
	if code, b := post(t, srv.URL+"/v1/completions", body); code != 200 || strings.Count(b, `"text"`) != 1 || !strings.Contains(b, "data: {\"error\":") || !strings.HasSuffix(b, "data: [DONE]\n\n") {
		t.Errorf("StreamError: %d %s", code, b)
	}
	if code, b := post(t, srv.URL+"/v1/completions", body); code != 200 || b != "data: [DONE]\n\n" {
		t.Errorf("Empty: %d %q", code, b)
	}
	if code, _ := post(t, srv.URL+"/v1/nothing", body); code != 404 {
		t.Errorf("unknown path: %d", code)
	}
	if code, _ := post(t, srv.URL+"/v1/completions", "{"); code != 400 {
		t.Errorf("bad body: %d", code)
	}
}
