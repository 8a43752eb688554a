package server

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-llm/sluice/api-frontend/engineclient"
	"github.com/sluice-llm/sluice/api-frontend/sse"
)

// TestBatchedSends streams concurrent requests (so that an engine step
// carries several streams' chunks), one with n 2 (two outputs of one
// stream in a step: the second waits for the first's flush) and one whose
// client reads late through a small send buffer (queued sends that the
// socket takes in part or not at all: the rest goes to the handler), for
// each way a step's chunks can be sent: batched through io_uring (skipped
// where the kernel refuses a ring), batched with send(2) at the step's end
// (sse.NewLoopBatch), and one by one (Config.NoSendBatch), on both HTTP
// servers. Every body must carry the whole text, its usage and [DONE], and
// the batched modes must have sent through the batch.
func TestBatchedSends(t *testing.T) {
	text := strings.Repeat("0123456789", 30)
	loop := func(max int) (*sse.Batch, error) { return sse.NewLoopBatch(max), nil }
	noRing := func(int) (*sse.Batch, error) { return nil, fmt.Errorf("test: %w", sse.ErrNoRing) }
	ring, ringErr := sse.NewBatch(16)
	if ring != nil {
		ring.Close()
	}
	for _, tc := range []struct {
		name     string
		off      bool
		newBatch func(int) (*sse.Batch, error)
		lean     bool
	}{
		{name: "io_uring/net-http"},
		{name: "io_uring/lean", lean: true},
		{name: "loop/net-http", newBatch: loop},
		{name: "loop/lean", newBatch: loop, lean: true},
		{name: "no-ring/net-http", newBatch: noRing},
		{name: "off/net-http", off: true},
		{name: "off/lean", off: true, lean: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.off && tc.newBatch == nil && ringErr != nil {
				t.Skipf("no io_uring here: %v", ringErr)
			}
			eng := newFakeEngine(text, time.Millisecond)
			client := engineclient.New([]engineclient.Transport{eng}, engineclient.Options{})
			srv := New(Config{ServedModelNames: []string{"m"}, sndBuf: 4096, NoSendBatch: tc.off}, Deps{Engines: client, Tokenizer: byteTok{}, Chat: simpleChat{}})
			srv.newBatch = tc.newBatch
			client.Start()
			t.Cleanup(client.Close)
			hs := newHTTPTest(t, srv)
			if tc.lean {
				hs = newLeanTest(t, srv.Handler())
			}
			post := func(body string) (*http.Response, error) {
				return http.Post(hs.URL+"/v1/completions", "application/json", strings.NewReader(body))
			}
			check := func(name, body string, n, tokens int) error {
				chunks := parseStream(t, []byte(body))
				got := make([]string, n)
				usage := false
				for _, c := range chunks {
					for _, ch := range c.Choices {
						got[ch.Index] += ch.Text
					}
					usage = usage || c.Usage != nil
				}
				for i, g := range got {
					if g != text[:tokens] {
						return fmt.Errorf("%s: choice %d has %d bytes of text %q…; want %d", name, i, len(g), g[:min(len(g), 20)], tokens)
					}
				}
				if !usage || !strings.HasSuffix(body, "data: [DONE]\n\n") {
					return fmt.Errorf("%s: no usage or no [DONE] at the end", name)
				}
				return nil
			}
			slow, err := post(`{"prompt":"s","max_tokens":250,"stream":true,"stream_options":{"include_usage":true}}`)
			if err != nil {
				t.Fatal(err)
			}
			defer slow.Body.Close()
			var wg sync.WaitGroup
			errs := make(chan error, 16)
			for i := range 7 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					n := 1 + i/6 // the last one: n 2
					resp, err := post(fmt.Sprintf(`{"prompt":"x%d","max_tokens":200,"n":%d,"stream":true,"stream_options":{"include_usage":true}}`, i, n))
					if err != nil {
						errs <- err
						return
					}
					defer resp.Body.Close()
					b, err := io.ReadAll(resp.Body)
					if err != nil {
						errs <- err
						return
					}
					errs <- check(fmt.Sprintf("stream %d", i), string(b), n, 200)
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Error(err)
				}
			}
			time.Sleep(100 * time.Millisecond) // the slow stream's socket is full by now
			var body strings.Builder
			buf := make([]byte, 512)
			for {
				n, err := slow.Body.Read(buf)
				body.WriteString(string(buf[:n]))
				if err != nil {
					break
				}
				time.Sleep(200 * time.Microsecond)
			}
			if err := check("slow stream", body.String(), 1, 250); err != nil {
				t.Error(err)
			}
			switch {
			case tc.off && srv.sends != nil:
				t.Error("NoSendBatch: the server still batches")
			case tc.off:
			case tc.name == "no-ring/net-http":
				if srv.sends[0].b != nil || srv.sends[0].sent.Load() != 0 {
					t.Error("sent through a batch that could not be made")
				}
			case srv.sends[0].sent.Load() == 0:
				t.Error("no chunk went through the batch")
			default:
				t.Logf("%d chunks sent through the batch, %d of them in part", srv.sends[0].sent.Load(), srv.sends[0].short.Load())
			}
		})
	}
}
