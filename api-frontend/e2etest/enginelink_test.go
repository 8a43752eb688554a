package e2etest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestEngineLinks streams the same greedy completion through each
// --engine-link (the frontend's own ZMTP reader and libzmq's DEALER) over
// ipc:// and tcp:// against a real engine process, and wants the same
// tokens, a finish reason and [DONE] from every one.
func TestEngineLinks(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	texts := map[string]string{}
	for _, tr := range []string{"ipc", "tcp"} {
		for _, link := range []string{"zmtp", "libzmq"} {
			name := tr + "/" + link
			t.Run(name, func(t *testing.T) {
				addr := engineAddr(t)
				if tr == "tcp" {
					addr = fmt.Sprintf("tcp://127.0.0.1:%d", freePort(t))
				}
				startEngine(t, addr)
				base, fe := startFrontend(t, addr, "--engine-link", link)
				resp, err := http.Post(base+"/v1/completions", "application/json", strings.NewReader(
					`{"model":"demo","prompt":[1,2,3],"max_tokens":12,"temperature":0,"ignore_eos":true,"stream":true}`))
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("HTTP %d", resp.StatusCode)
				}
				events := sse(t, bufio.NewReader(resp.Body))
				if len(events) < 2 || events[len(events)-1] != "[DONE]" {
					t.Fatalf("stream: %v", events)
				}
				var text strings.Builder
				finish := ""
				for _, e := range events[:len(events)-1] {
					var c struct {
						Choices []struct {
							Text         string  `json:"text"`
							FinishReason *string `json:"finish_reason"`
						} `json:"choices"`
					}
					if err := json.Unmarshal([]byte(e), &c); err != nil {
						t.Fatalf("chunk %q: %v", e, err)
					}
					for _, ch := range c.Choices {
						text.WriteString(ch.Text)
						if ch.FinishReason != nil {
							finish = *ch.FinishReason
						}
					}
				}
				if finish != "length" {
					t.Fatalf("finish reason %q, want length; events %v", finish, events)
				}
				texts[name] = text.String()
				// The frontend says which link it took (one line per
				// engine connection and API server).
				var saw bool
				for _, line := range strings.Split(fe.Output(), "\n") {
					if strings.Contains(line, "engine link") {
						if !strings.Contains(line, link) {
							t.Fatalf("--engine-link %s, frontend logged %q", link, line)
						}
						saw = true
					}
				}
				if !saw {
					t.Fatalf("no \"engine link\" line in the frontend's log:\n%s", fe.Output())
				}
			})
		}
	}
	var first string
	for name, s := range texts {
		if first == "" {
			first = s
		}
		if s != first {
			t.Errorf("%s streamed %q, another link %q", name, s, first)
		}
	}
	if len(texts) != 4 {
		t.Errorf("only %d of 4 links streamed", len(texts))
	}
}
