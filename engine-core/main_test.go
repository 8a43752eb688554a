package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-llm/sluice/ipc"
	"github.com/sluice-llm/sluice/ipc/zmqtransport"
)

func TestStartupErrors(t *testing.T) {
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"bad flag", []string{"--nope"}, 2, "nope"},
		{"bad executor", []string{"--model", "sim", "--executor", "gpu"}, 2, "--executor"},
		{"kv too small", []string{"--model", "sim", "--executor", "sim", "--num-kv-blocks", "4"}, 1, "KV cache too small"},
		{"missing model", []string{"--model", filepath.Join(t.TempDir(), "absent"), "--executor", "cpu"}, 1, "load model"},
		{"script without tokenizer", []string{"--model", "sim", "--executor", "sim", "--sim-script", "x.jsonl"}, 1, "tokenizer"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if code := run(tc.args, &stderr); code != tc.code || !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("exit %d (want %d), stderr %q (want %q)", code, tc.code, stderr.String(), tc.want)
			}
		})
	}
}

// TestServe runs the engine over a real socket with each executor,
// generates through it, and stops it with SIGTERM.
func TestServe(t *testing.T) {
	cases := []struct {
		name  string
		args  []string
		model string
		vocab int
	}{
		{"sim", []string{"--model", "sim", "--executor", "sim", "--max-model-len", "256", "--sim-step-ms", "1",
			"--sim-vocab-size", "500", "--served-model-name", "simmy"}, "simmy", 500},
		{"cpu demo", []string{"--model", "demo", "--executor", "cpu", "--max-model-len", "128", "--threads", "1"}, "", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("XDG_CACHE_HOME", t.TempDir())
			serve(t, tc.args, tc.model, tc.vocab)
		})
	}
}

func serve(t *testing.T, args []string, model string, vocab int) {
	dir := t.TempDir()
	addr := "ipc://" + filepath.Join(dir, "engine.sock")
	done := make(chan int, 1)
	var stderr bytes.Buffer
	go func() {
		done <- run(append(args, "--listen", addr, "--log-format", "console"), &stderr)
	}()
	conn, err := zmqtransport.Dial(zmqtransport.ClientConfig{Addr: addr, FrontendID: "fe-test"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if r, ok := conn.Ready(); ok {
			if (model != "" && r.ModelName != model) || r.MaxModelLen <= 0 || (vocab != 0 && r.VocabSize != vocab) || r.NumKVBlocks <= 0 {
				t.Fatalf("READY %+v", r)
			}
			break
		}
		select {
		case code := <-done:
			t.Fatalf("engine exited %d:\n%s", code, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("no READY")
		}
		time.Sleep(10 * time.Millisecond)
	}
	req := &ipc.AddRequest{RequestID: "r1", PromptTokenIDs: []int32{5, 6, 7}, Params: ipc.SamplingParams{MaxTokens: 10, Logprobs: -1, IgnoreEOS: true}}
	if err := conn.Send(ipc.KindAdd, req); err != nil {
		t.Fatal(err)
	}
	var toks []int32
	for finished := false; !finished; {
		select {
		case o := <-conn.Outputs():
			for _, out := range o.Outputs {
				toks = append(toks, out.NewTokenIDs...)
				finished = finished || out.FinishReason != ipc.FinishNone
				if out.Error != "" {
					t.Fatalf("error output: %s", out.Error)
				}
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("no outputs; got %v", toks)
		}
	}
	if len(toks) != 10 {
		t.Fatalf("got %d tokens, want 10", len(toks))
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d; log:\n%s", code, stderr.String())
		}
		// the memory profile: after load and at stop (and, for a real
		// model, the activation scratch with the model's sizes)
		logs := stderr.String()
		want := []string{`"when": "after load"`, `"when": "at stop"`, `"rss_anon"`, `"go_heap_objects"`}
		if !strings.Contains(args[1], "sim") {
			want = append(want, `"scratch_bytes"`, `"kv_cache_bytes"`)
		}
		for _, w := range want {
			if !strings.Contains(logs, w) {
				t.Errorf("log lacks %s:\n%s", w, logs)
			}
		}
	case <-time.After(30 * time.Second):
		t.Fatal("engine did not stop on SIGTERM")
	}
}
