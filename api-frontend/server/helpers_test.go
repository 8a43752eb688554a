package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluice-llm/sluice/api-frontend/engineclient"
	"github.com/sluice-llm/sluice/api-frontend/httpserve"
	"github.com/sluice-llm/sluice/api-frontend/openai"
	"github.com/sluice-llm/sluice/api-frontend/rawsock"
	"github.com/sluice-llm/sluice/api-frontend/sse"
)

// simpleChat renders messages as "role: content\n" lines (a stand-in
// template for tests).
type simpleChat struct{}

func (simpleChat) Render(c *openai.Chat) (string, error) {
	var b strings.Builder
	for _, m := range c.Messages {
		var v struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		}
		if err := json.Unmarshal(m, &v); err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "%s: %v\n", v.Role, v.Content)
	}
	if c.AddGenerationPrompt {
		b.WriteString("assistant: ")
	}
	return b.String(), nil
}

type testEnv struct {
	t      *testing.T
	eng    *fakeEngine
	client *engineclient.Client
	srv    *Server
	http   *httptest.Server
}

func newTestEnv(t *testing.T, cfg Config, script string) *testEnv {
	t.Helper()
	return newTestEnvStep(t, cfg, script, time.Millisecond)
}

// newTestEnvStep is newTestEnv with the fake engine stepping every step.
func newTestEnvStep(t *testing.T, cfg Config, script string, step time.Duration) *testEnv {
	t.Helper()
	if cfg.ServedModelNames == nil {
		cfg.ServedModelNames = []string{"m"}
	}
	eng := newFakeEngine(script, step)
	var srv *Server
	client := engineclient.New([]engineclient.Transport{eng}, engineclient.Options{})
	srv = New(cfg, Deps{Engines: client, Tokenizer: byteTok{}, Chat: simpleChat{}})
	client.Start()
	env := &testEnv{t: t, eng: eng, client: client, srv: srv, http: newHTTPTest(t, srv)}
	t.Cleanup(client.Close)
	return env
}

// newHTTPTest serves srv as api-frontend does: streams send on the
// connection and keep it alive (sse.ConnContext), and the connections are
// rawsock's (the stream's head is held until its first chunk).
//
// With SLUICE_TEST_HTTP_SERVER=lean the connections are served by
// api-frontend/httpserve (--http-server lean) instead of net/http.
func newHTTPTest(t *testing.T, srv *Server) *httptest.Server {
	if os.Getenv("SLUICE_TEST_HTTP_SERVER") == "lean" {
		return newLeanTest(t, srv.Handler())
	}
	hs := httptest.NewUnstartedServer(srv.Handler())
	hs.Config.ConnContext = sse.ConnContext
	hs.Listener = rawsock.Listener(hs.Listener)
	hs.Start()
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
	})
	return hs
}

// newLeanTest serves h with httpserve on a rawsock listener, as
// api-frontend --http-server lean does; the httptest.Server returned only
// carries the URL (its Close and CloseClientConnections do nothing).
func newLeanTest(t *testing.T, h http.Handler) *httptest.Server {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ls := &httpserve.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 30 * time.Second, ConnContext: sse.ConnContext}
	go func() { _ = ls.Serve(rawsock.Listener(ln)) }()
	t.Cleanup(func() { _ = ls.Close() })
	return &httptest.Server{URL: "http://" + ln.Addr().String(), Listener: ln, Config: &http.Server{}}
}

func (e *testEnv) post(path, body string, hdr ...string) (*http.Response, []byte) {
	e.t.Helper()
	req, err := http.NewRequest("POST", e.http.URL+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// sseEvents splits an SSE body into its data payloads.
func sseEvents(t *testing.T, body []byte) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		d, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("bad SSE line %q", line)
		}
		out = append(out, d)
	}
	return out
}
