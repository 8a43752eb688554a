package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-llm/sluice/api-frontend/webui"
	"github.com/sluice-llm/sluice/api-frontend/webui/fakeapi"
)

// TestProxy serves the UI in front of the fake as if it were a real server.
func TestProxy(t *testing.T) {
	up := httptest.NewServer(fakeapi.New(fakeapi.Config{TokenInterval: time.Millisecond}))
	defer up.Close()
	h, err := proxyHandler(up.URL, "", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	// A stream through the proxy arrives whole and in order.
	resp, err := srv.Client().Post(srv.URL+"/v1/completions", "application/json",
		strings.NewReader(`{"prompt":"x","stream":true,"max_tokens":5}`))
	if err != nil {
		t.Fatal(err)
	}
	var events []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			events = append(events, d)
		}
	}
	resp.Body.Close()
	if len(events) != 6 || events[5] != "[DONE]" {
		t.Fatalf("proxied stream: %q", events)
	}

	resp, err = srv.Client().Get(srv.URL + "/ui/api/stats")
	if err != nil {
		t.Fatal(err)
	}
	var st webui.Stats
	err = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("stats: %d %v", resp.StatusCode, err)
	}
	if st.Frontend.ID == "" || st.Frontend.RequestsFinished != 1 || st.Frontend.GeneratedTokens != 5 || len(st.Engines) != 1 || !st.Engines[0].Up {
		t.Errorf("stats read from the upstream's /metrics: %+v", st)
	}
	if resp.Header.Get("Content-Security-Policy") != webui.CSP {
		t.Error("the UI's responses lack the CSP")
	}
}

// TestProxyLateBodyRead is the regression test for TestProxy's flake on a
// loaded machine (the stream cut after its first event, the proxy logging
// "ReverseProxy read error during body copy: use of closed network
// connection"). Having copied the declared Content-Length upstream, the
// proxy's transport reads the inbound body once more to check it is not
// longer; if its goroutine ran that read only after the upstream's headers
// had been written back, the HTTP/1 server had already drained and closed
// the inbound body, the read failed, and the transport closed the upstream
// connection under the stream. heldBody holds that read until the client
// has the first event, the order the scheduler produced under load.
func TestProxyLateBodyRead(t *testing.T) {
	up := httptest.NewServer(fakeapi.New(fakeapi.Config{TokenInterval: time.Millisecond}))
	defer up.Close()
	release := make(chan struct{})
	var once sync.Once
	releaseOnce := func() { once.Do(func() { close(release) }) }
	defer releaseOnce()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	h, err := proxyHandler(up.URL, "", "", lateRead{rt: tr, release: release})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/completions",
		strings.NewReader(`{"prompt":"x","stream":true,"max_tokens":5}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var events []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			events = append(events, d)
			releaseOnce() // the client has the first event: let the late read run
		}
	}
	if len(events) != 6 || events[5] != "[DONE]" {
		t.Fatalf("proxied stream with the body's last read after the response headers (scan error %v): %q", sc.Err(), events)
	}
}

// lateRead is an http.RoundTripper whose request bodies, once they have
// returned their declared Content-Length, hold the next Read until release
// is closed.
type lateRead struct {
	rt      http.RoundTripper
	release <-chan struct{}
}

// RoundTrip implements http.RoundTripper.
func (l lateRead) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil && r.ContentLength > 0 {
		r = r.Clone(r.Context())
		r.Body = &heldBody{ReadCloser: r.Body, left: r.ContentLength, release: l.release}
	}
	return l.rt.RoundTrip(r)
}

// heldBody is a request body whose reads past its first left bytes wait for release.
type heldBody struct {
	io.ReadCloser
	left    int64
	release <-chan struct{}
}

// Read implements io.Reader.
func (b *heldBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		<-b.release
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

func TestProxyBadURL(t *testing.T) {
	for _, u := range []string{"", "localhost:8000", "://x"} {
		if _, err := proxyHandler(u, "", "", nil); err == nil {
			t.Errorf("proxyHandler(%q) accepted a bad URL", u)
		}
	}
}
