package e2etest

import (
	"context"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"testing"
)

// TestStreamKeepsConnection: streamed responses leave their connection
// alive, so a client's next request (streamed or not) reuses it instead of
// paying a new TCP connection per request (issue 23 item 6), and each
// body is complete.
func TestStreamKeepsConnection(t *testing.T) {
	addr := engineAddr(t)
	startEngine(t, addr)
	base, _ := startFrontend(t, addr)
	client := &http.Client{Transport: &http.Transport{}}
	bodies := []string{
		`{"model":"demo","prompt":"Once upon a time","max_tokens":5,"ignore_eos":true,"stream":true}`,
		`{"model":"demo","prompt":"Once upon a time","max_tokens":3,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`,
		`{"model":"demo","prompt":"Once upon a time","max_tokens":2,"ignore_eos":true}`,
		`{"model":"demo","prompt":"Once upon a time","max_tokens":4,"ignore_eos":true,"stream":true}`,
	}
	for i, body := range bodies {
		var reused bool
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
			GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused }})
		req, _ := http.NewRequestWithContext(ctx, "POST", base+"/v1/completions", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: HTTP %d, %v: %s", i, resp.StatusCode, err, b)
		}
		if strings.Contains(body, `"stream":true`) && !strings.HasSuffix(string(b), "data: [DONE]\n\n") {
			t.Fatalf("request %d: stream does not end with [DONE]: %q", i, b)
		}
		if resp.Close {
			t.Fatalf("request %d: the server closes the connection", i)
		}
		if i > 0 && !reused {
			t.Fatalf("request %d: a new connection; the previous one was not kept alive", i)
		}
	}
}
