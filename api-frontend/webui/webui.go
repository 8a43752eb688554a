// Package webui serves Sluice's built-in web UI: a playground (/ui/) that
// streams chat and raw completions over the real OpenAI endpoints, and a
// dashboard (/ui/dashboard) charting the server's live figures, fed by
// /ui/api/stats (JSON) and /ui/api/stats/stream (server-sent events, one
// document a second).
//
// The pages and their script bundle are built from the TypeScript sources in
// this directory by `go tool task webui:build` into static/app/, which is
// embedded; without the bundle the package still compiles and /ui/ explains
// how to build it (see Built). Every response carries a strict
// Content-Security-Policy: the pages load nothing but their own assets and
// talk to nothing but their own origin.
package webui

import (
	"embed"
	"encoding/json"
	"io/fs"
	"net/http"
	"os"
	"path"
	"strings"
	"time"
)

//go:embed all:static
var static embed.FS

// appDir is where the build writes the bundle inside static.
const appDir = "static/app"

// CSP is the Content-Security-Policy every response carries.
const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; " +
	"font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// StatsInterval is how often /ui/api/stats/stream sends a document.
const StatsInterval = time.Second

// Options configure the handler.
type Options struct {
	// Stats returns the live figures the dashboard charts, as a
	// JSON-serialisable value; the server returns a Stats (see FromGatherer).
	// Nil disables the stats endpoints (404).
	Stats func() any
	// APIKeyRequired makes the playground ask for an API key, sent as a
	// Bearer token.
	APIKeyRequired bool
	// Dir, when set, serves the bundle from this directory instead of the
	// embedded one (development: `node build.mjs --watch` writes static/app).
	Dir string
}

// Built reports whether the web bundle was embedded at build time.
func Built() bool {
	_, err := fs.Stat(static, appDir+"/index.html")
	return err == nil
}

// Handler serves the UI under /ui/: mount it for the path prefix /ui (with
// gin: r.Any("/ui", h) and r.Any("/ui/*path", h) around gin.WrapH). It
// answers
//
//	/ui, /ui/            the playground
//	/ui/dashboard        the dashboard
//	/ui/assets/*         the bundle's scripts and styles
//	/ui/api/config       {"api_key_required": bool, "built": bool}
//	/ui/api/stats        Options.Stats() as JSON
//	/ui/api/stats/stream the same as server-sent events, once a second
func Handler(opts Options) http.Handler {
	var app fs.FS
	if opts.Dir != "" {
		app = os.DirFS(opts.Dir)
	} else if Built() {
		sub, err := fs.Sub(static, appDir)
		if err == nil {
			app = sub
		}
	}
	return newHandler(app, opts, StatsInterval)
}

// handler is Handler over an explicit bundle (nil: not built).
type handler struct {
	app      fs.FS
	opts     Options
	interval time.Duration
}

func newHandler(app fs.FS, opts Options, interval time.Duration) *handler {
	return &handler{app: app, opts: opts, interval: interval}
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", CSP)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "no-referrer")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hd.Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed on "+r.URL.Path)
		return
	}
	p := r.URL.Path
	switch {
	case p == "/ui":
		http.Redirect(w, r, "/ui/", http.StatusMovedPermanently)
	case p == "/ui/" || p == "/ui/index.html":
		h.page(w, r, "index.html")
	case p == "/ui/dashboard" || p == "/ui/dashboard.html":
		h.page(w, r, "dashboard.html")
	case p == "/ui/dashboard/":
		// The pages' relative links resolve from /ui/.
		http.Redirect(w, r, "/ui/dashboard", http.StatusMovedPermanently)
	case strings.HasPrefix(p, "/ui/assets/"):
		h.asset(w, r, strings.TrimPrefix(p, "/ui/"))
	case p == "/ui/api/config":
		hd.Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusOK, map[string]bool{"api_key_required": h.opts.APIKeyRequired, "built": h.app != nil})
	case p == "/ui/api/stats":
		h.stats(w)
	case p == "/ui/api/stats/stream":
		h.statsStream(w, r)
	default:
		writeError(w, http.StatusNotFound, "no such page: "+p)
	}
}

// notBuilt is served for the pages when the bundle is absent.
const notBuilt = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sluice web UI not built</title></head>
<body><main><h1>Sluice web UI not built</h1>
<p>This binary was built without the web UI bundle. Build the bundle, then rebuild the server:</p>
<pre>go tool task webui:build
go build -o bin/ ./api-frontend</pre>
<p>The OpenAI API under <code>/v1/</code> works either way.</p></main></body></html>
`

func (h *handler) page(w http.ResponseWriter, r *http.Request, name string) {
	w.Header().Set("Cache-Control", "no-cache")
	if h.app == nil {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusServiceUnavailable)
		if r.Method != http.MethodHead {
			_, _ = w.Write([]byte(notBuilt))
		}
		return
	}
	h.serveFile(w, r, name)
}

func (h *handler) asset(w http.ResponseWriter, r *http.Request, name string) {
	clean := path.Clean(name)
	if h.app == nil || clean != name || !strings.HasPrefix(clean, "assets/") || !fs.ValidPath(clean) {
		writeError(w, http.StatusNotFound, "no such asset: "+name)
		return
	}
	w.Header().Set("Cache-Control", "no-cache")
	h.serveFile(w, r, clean)
}

func (h *handler) serveFile(w http.ResponseWriter, r *http.Request, name string) {
	f, err := h.app.Open(name)
	if err != nil {
		writeError(w, http.StatusNotFound, "no such file: "+name)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.IsDir() {
		writeError(w, http.StatusNotFound, "no such file: "+name)
		return
	}
	rs, ok := f.(interface {
		Read([]byte) (int, error)
		Seek(int64, int) (int64, error)
	})
	if !ok {
		writeError(w, http.StatusInternalServerError, "file "+name+" is not seekable")
		return
	}
	// http.ServeContent sets Content-Type from the extension and handles
	// HEAD, ranges and If-None-Match.
	http.ServeContent(w, r, name, st.ModTime(), rs)
}

func (h *handler) stats(w http.ResponseWriter) {
	w.Header().Set("Cache-Control", "no-store")
	if h.opts.Stats == nil {
		writeError(w, http.StatusNotFound, "this server publishes no stats")
		return
	}
	writeJSON(w, http.StatusOK, h.opts.Stats())
}

func (h *handler) statsStream(w http.ResponseWriter, r *http.Request) {
	if h.opts.Stats == nil {
		writeError(w, http.StatusNotFound, "this server publishes no stats")
		return
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "streaming unsupported")
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	t := time.NewTicker(h.interval)
	defer t.Stop()
	var buf []byte
	for {
		b, err := json.Marshal(h.opts.Stats())
		if err != nil {
			b, _ = json.Marshal(errorBody(http.StatusInternalServerError, "encode stats: "+err.Error()))
		}
		buf = append(append(append(buf[:0], "data: "...), b...), "\n\n"...)
		if _, err := w.Write(buf); err != nil {
			return
		}
		fl.Flush()
		select {
		case <-r.Context().Done():
			return
		case <-t.C:
		}
	}
}

// errorBody is the OpenAI error document.
func errorBody(status int, msg string) map[string]any {
	typ := "invalid_request_error"
	switch {
	case status == http.StatusNotFound:
		typ = "not_found_error"
	case status >= 500:
		typ = "internal_server_error"
	}
	return map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": status}}
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, errorBody(status, msg))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(errorBody(status, "encode response: "+err.Error()))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
