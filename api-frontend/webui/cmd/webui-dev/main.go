// Command webui-dev serves the web UI (/ui/) for development and tests,
// without an api-frontend built with it:
//
//   - by default in front of a scripted fake of Sluice's OpenAI endpoints
//     (package fakeapi), so no engine is needed;
//   - with -proxy URL in front of a running Sluice (or any OpenAI-compatible)
//     server: /ui/ is served here, everything else is proxied to URL
//     (streams flushed as they come), and the dashboard's stats are read
//     from URL's /metrics.
//
// It prints "listening on http://ADDR" once ready.
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sluice-llm/sluice/api-frontend/webui"
	"github.com/sluice-llm/sluice/api-frontend/webui/fakeapi"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address (port 0: any free port)")
	proxy := flag.String("proxy", "", "serve the UI in front of this server (e.g. http://127.0.0.1:8000) instead of the fake")
	modelName := flag.String("model", "demo", "fake: model name to list and serve")
	tokenMS := flag.Float64("token-ms", 40, "fake: milliseconds between generated tokens")
	firstMS := flag.Float64("first-token-ms", 120, "fake: milliseconds before the first token")
	apiKey := flag.String("api-key", "", "fake: require this Bearer token on /v1/; proxy: send it when reading /metrics")
	maxRunning := flag.Int("max-running", 4, "fake: requests generating at once; more wait")
	uiDir := flag.String("ui-dir", "", "serve the UI bundle from this directory instead of the embedded one (with node build.mjs --watch)")
	flag.Parse()

	var h http.Handler
	if *proxy != "" {
		var err error
		h, err = proxyHandler(*proxy, *apiKey, *uiDir, nil)
		if err != nil {
			fmt.Fprintf(os.Stderr, "webui-dev: %v\n", err)
			os.Exit(2)
		}
	} else {
		h = fakeapi.New(fakeapi.Config{
			Model:           *modelName,
			TokenInterval:   time.Duration(*tokenMS * float64(time.Millisecond)),
			FirstTokenDelay: time.Duration(*firstMS * float64(time.Millisecond)),
			APIKey:          *apiKey,
			MaxRunning:      *maxRunning,
			UIDir:           *uiDir,
		})
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "webui-dev: listen %s: %v\n", *addr, err)
		os.Exit(1)
	}
	fmt.Printf("listening on http://%s\n", ln.Addr())
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	if err := hs.Serve(ln); err != nil {
		fmt.Fprintf(os.Stderr, "webui-dev: serve: %v\n", err)
		os.Exit(1)
	}
}

// proxyHandler serves /ui/ itself and proxies the rest to upstream through
// rt (nil: http.DefaultTransport).
func proxyHandler(upstream, apiKey, uiDir string, rt http.RoundTripper) (http.Handler, error) {
	u, err := url.Parse(upstream)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("parse -proxy %q: want http://HOST:PORT (%v)", upstream, err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = rt
	rp.FlushInterval = -1 // server-sent events: flush every write
	client := &http.Client{Transport: rt, Timeout: 5 * time.Second}
	stats := func() any {
		st, err := upstreamStats(client, u.JoinPath("/metrics").String(), apiKey, u.Host)
		if err != nil {
			return map[string]any{"error": map[string]any{"message": err.Error(), "type": "upstream_error", "code": 502}}
		}
		return st
	}
	ui := webui.Handler(webui.Options{Stats: stats, APIKeyRequired: apiKey != "", Dir: uiDir})
	mux := http.NewServeMux()
	mux.Handle("/ui", ui)
	mux.Handle("/ui/", ui)
	mux.Handle("/", fullDuplex(rp))
	return mux, nil
}

// fullDuplex lets h go on reading the request body after it has begun the
// response, as a reverse proxy does: its transport copies the body upstream
// in its own goroutine and, after the declared Content-Length, reads once
// more to check the body is not longer. The upstream may answer before that
// read runs (on a loaded machine it often did), and by default an HTTP/1
// server drains and closes the request body when the response headers go
// out; the late read then fails and the transport closes the upstream
// connection under the response being streamed (golang/go#40747). In full
// duplex the server leaves the body to the handler until it returns.
func fullDuplex(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// HTTP/2 is always full duplex and answers ErrNotSupported.
		_ = http.NewResponseController(w).EnableFullDuplex()
		h.ServeHTTP(w, r)
	})
}

// upstreamStats reads the upstream frontend's /metrics into webui.Stats.
func upstreamStats(c *http.Client, metricsURL, apiKey, id string) (webui.Stats, error) {
	req, err := http.NewRequest(http.MethodGet, metricsURL, nil)
	if err != nil {
		return webui.Stats{}, fmt.Errorf("metrics request: %w", err)
	}
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	resp, err := c.Do(req)
	if err != nil {
		return webui.Stats{}, fmt.Errorf("get %s: %w", metricsURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return webui.Stats{}, fmt.Errorf("get %s: %s", metricsURL, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return webui.Stats{}, fmt.Errorf("parse %s: %w", metricsURL, err)
	}
	g := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		out := make([]*dto.MetricFamily, 0, len(mfs))
		for _, mf := range mfs {
			out = append(out, mf)
		}
		return out, nil
	})
	st, err := webui.FromGatherer(g, "", id)
	if err != nil {
		return webui.Stats{}, err
	}
	st.Frontend.PID = 0 // not this process; /metrics does not say
	return st, nil
}
