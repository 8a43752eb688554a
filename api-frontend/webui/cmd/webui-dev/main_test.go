package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluice-llm/sluice/api-frontend/webui"
	"github.com/sluice-llm/sluice/api-frontend/webui/fakeapi"
)

// TestProxy serves the UI in front of the fake as if it were a real server.
func TestProxy(t *testing.T) {
	up := httptest.NewServer(fakeapi.New(fakeapi.Config{TokenInterval: time.Millisecond}))
	defer up.Close()
	h, err := proxyHandler(up.URL, "", "")
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

func TestProxyBadURL(t *testing.T) {
	for _, u := range []string{"", "localhost:8000", "://x"} {
		if _, err := proxyHandler(u, "", ""); err == nil {
			t.Errorf("proxyHandler(%q) accepted a bad URL", u)
		}
	}
}
