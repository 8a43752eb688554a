package webui

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"
)

// testApp stands in for the built bundle.
var testApp = fstest.MapFS{
	"index.html":            {Data: []byte("<!doctype html><title>playground</title>")},
	"dashboard.html":        {Data: []byte("<!doctype html><title>dashboard</title>")},
	"assets/playground.js":  {Data: []byte("console.log(1)")},
	"assets/playground.css": {Data: []byte("body{}")},
}

func TestHandlerRoutes(t *testing.T) {
	h := newHandler(testApp, Options{Stats: func() any { return Stats{Model: "m"} }, APIKeyRequired: true}, time.Second)
	tests := []struct {
		name, method, path string
		status             int
		contentType        string // prefix
		body               string // substring
		location           string
	}{
		{"playground", "GET", "/ui/", 200, "text/html", "<title>playground", ""},
		{"playground index", "GET", "/ui/index.html", 200, "text/html", "<title>playground", ""},
		{"head", "HEAD", "/ui/", 200, "text/html", "", ""},
		{"bare prefix", "GET", "/ui", 301, "", "", "/ui/"},
		{"dashboard", "GET", "/ui/dashboard", 200, "text/html", "<title>dashboard", ""},
		{"dashboard slash", "GET", "/ui/dashboard/", 301, "", "", "/ui/dashboard"},
		{"script", "GET", "/ui/assets/playground.js", 200, "text/javascript", "console.log", ""},
		{"style", "GET", "/ui/assets/playground.css", 200, "text/css", "body{}", ""},
		{"missing asset", "GET", "/ui/assets/nope.js", 404, "application/json", `"not_found_error"`, ""},
		{"traversal", "GET", "/ui/assets/../index.html", 404, "application/json", "no such asset", ""},
		{"asset dir", "GET", "/ui/assets/", 404, "application/json", "", ""},
		{"unknown", "GET", "/ui/secret", 404, "application/json", "no such page", ""},
		{"post", "POST", "/ui/", 405, "application/json", "not allowed", ""},
		{"config", "GET", "/ui/api/config", 200, "application/json", `{"api_key_required":true,"built":true}`, ""},
		{"stats", "GET", "/ui/api/stats", 200, "application/json", `"model":"m"`, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(tc.method, tc.path, nil))
			if w.Code != tc.status {
				t.Fatalf("%s %s: status %d, want %d (body %q)", tc.method, tc.path, w.Code, tc.status, w.Body.String())
			}
			if got := w.Header().Get("Content-Security-Policy"); got != CSP {
				t.Errorf("CSP = %q, want %q", got, CSP)
			}
			if got := w.Header().Get("X-Content-Type-Options"); got != "nosniff" {
				t.Errorf("X-Content-Type-Options = %q", got)
			}
			if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, tc.contentType) {
				t.Errorf("Content-Type = %q, want prefix %q", ct, tc.contentType)
			}
			if !strings.Contains(w.Body.String(), tc.body) {
				t.Errorf("body %q lacks %q", w.Body.String(), tc.body)
			}
			if tc.method == "HEAD" && w.Body.Len() != 0 {
				t.Errorf("HEAD has a body of %d bytes", w.Body.Len())
			}
			if got := w.Header().Get("Location"); got != tc.location {
				t.Errorf("Location = %q, want %q", got, tc.location)
			}
		})
	}
}

// TestCSPIsStrict pins the directives the pages are written for.
func TestCSPIsStrict(t *testing.T) {
	for _, d := range []string{"default-src 'self'", "script-src 'self'", "style-src 'self'", "connect-src 'self'",
		"img-src 'self' data:", "frame-ancestors 'none'"} {
		if !strings.Contains(CSP, d+";") && !strings.HasSuffix(CSP, d) {
			t.Errorf("CSP lacks %q", d)
		}
	}
	if strings.Contains(CSP, "unsafe") || strings.Contains(CSP, "*") {
		t.Errorf("CSP allows too much: %q", CSP)
	}
}

func TestHandlerNotBuilt(t *testing.T) {
	h := newHandler(nil, Options{}, time.Second)
	for _, p := range []string{"/ui/", "/ui/dashboard"} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", p, nil))
		if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "go tool task webui:build") {
			t.Errorf("GET %s without a bundle: %d %q, want 503 with build instructions", p, w.Code, w.Body.String())
		}
		if w.Header().Get("Content-Security-Policy") != CSP {
			t.Errorf("GET %s: no CSP", p)
		}
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/ui/api/config", nil))
	if got := strings.TrimSpace(w.Body.String()); got != `{"api_key_required":false,"built":false}` {
		t.Errorf("config = %s", got)
	}
	for _, p := range []string{"/ui/api/stats", "/ui/api/stats/stream", "/ui/assets/playground.js"} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", p, nil))
		if w.Code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", p, w.Code)
		}
		var e struct {
			Error struct{ Message string } `json:"error"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error.Message == "" {
			t.Errorf("GET %s: body %q is not an OpenAI error (%v)", p, w.Body.String(), err)
		}
	}
}

// TestHandlerBuiltMatchesEmbed checks the exported Handler agrees with Built.
func TestHandlerBuiltMatchesEmbed(t *testing.T) {
	w := httptest.NewRecorder()
	Handler(Options{}).ServeHTTP(w, httptest.NewRequest("GET", "/ui/", nil))
	if want := map[bool]int{true: 200, false: 503}[Built()]; w.Code != want {
		t.Errorf("Built() = %v but GET /ui/ = %d", Built(), w.Code)
	}
}

func TestStatsStream(t *testing.T) {
	var calls atomic.Int64
	h := newHandler(testApp, Options{Stats: func() any {
		n := calls.Add(1)
		return Stats{Frontend: FrontendStats{ID: "f", StreamsOpen: n}}
	}}, 5*time.Millisecond)
	srv := httptest.NewServer(h)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/ui/api/stats/stream", nil)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type = %q", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	var got []int64
	for sc.Scan() && len(got) < 3 {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("unexpected line %q", line)
		}
		var s Stats
		if err := json.Unmarshal([]byte(data), &s); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
		got = append(got, s.Frontend.StreamsOpen)
	}
	if len(got) != 3 || got[0] >= got[1] || got[1] >= got[2] {
		t.Fatalf("events carried %v, want three fresh documents", got)
	}
	cancel()
	_, _ = io.Copy(io.Discard, resp.Body)
}

func TestHandlerDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "index.html"), []byte("<title>from disk</title>"), 0o644); err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	Handler(Options{Dir: dir}).ServeHTTP(w, httptest.NewRequest("GET", "/ui/", nil))
	if w.Code != 200 || !strings.Contains(w.Body.String(), "from disk") {
		t.Errorf("GET /ui/ with Dir: %d %q", w.Code, w.Body.String())
	}
}
