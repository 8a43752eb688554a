// Command webui-fake serves the web UI (/ui/) in front of a scripted fake of
// Sluice's OpenAI endpoints (package fakeapi), for developing and testing the
// UI without an engine. It prints "listening on http://ADDR" once ready.
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/sluice-llm/sluice/api-frontend/webui/fakeapi"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address (port 0: any free port)")
	model := flag.String("model", "demo", "model name to list and serve")
	tokenMS := flag.Float64("token-ms", 40, "milliseconds between generated tokens")
	firstMS := flag.Float64("first-token-ms", 120, "milliseconds before the first token")
	apiKey := flag.String("api-key", "", "require this Bearer token on /v1/")
	maxRunning := flag.Int("max-running", 4, "requests generating at once; more wait")
	flag.Parse()

	srv := fakeapi.New(fakeapi.Config{
		Model:           *model,
		TokenInterval:   time.Duration(*tokenMS * float64(time.Millisecond)),
		FirstTokenDelay: time.Duration(*firstMS * float64(time.Millisecond)),
		APIKey:          *apiKey,
		MaxRunning:      *maxRunning,
	})
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "webui-fake: listen %s: %v\n", *addr, err)
		os.Exit(1)
	}
	fmt.Printf("listening on http://%s\n", ln.Addr())
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	if err := hs.Serve(ln); err != nil {
		fmt.Fprintf(os.Stderr, "webui-fake: serve: %v\n", err)
		os.Exit(1)
	}
}
