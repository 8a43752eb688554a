package main

import (
	"bytes"
	"fmt"
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

// engineProc is an engine started by startEngine: run's exit status
// arrives on done, its log in stderr (read it only after done).
type engineProc struct {
	conn   *zmqtransport.EngineConn
	done   chan int
	stderr *bytes.Buffer
	ready  ipc.Ready
}

// startEngine runs the engine with args on a fresh ipc socket and connects
// a frontend to it, waiting for READY.
func startEngine(t *testing.T, args []string) *engineProc {
	t.Helper()
	dir := t.TempDir()
	addr := "ipc://" + filepath.Join(dir, "engine.sock")
	e := &engineProc{done: make(chan int, 1), stderr: &bytes.Buffer{}}
	go func() {
		e.done <- run(append(args, "--listen", addr, "--log-format", "console"), e.stderr)
	}()
	conn, err := zmqtransport.Dial(zmqtransport.ClientConfig{Addr: addr, FrontendID: "fe-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	e.conn = conn
	deadline := time.Now().Add(60 * time.Second)
	for {
		if r, ok := conn.Ready(); ok {
			e.ready = r
			return e
		}
		select {
		case code := <-e.done:
			t.Fatalf("engine exited %d:\n%s", code, e.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("no READY")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stop sends SIGTERM and waits for a clean exit.
func (e *engineProc) stop(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-e.done:
		if code != 0 {
			t.Fatalf("exit %d; log:\n%s", code, e.stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("engine did not stop on SIGTERM")
	}
}

// TestBurstSharesFirstStep sends a burst of requests over ZeroMQ to an
// idle engine, each one a separate message as a frontend sends them: with
// the arrival window on, all of them are prefilled in the engine's first
// step. The window (30 s) is far longer than the burst takes to arrive; it
// ends because the burst fills --max-num-seqs, so the test waits on no
// clock.
func TestBurstSharesFirstStep(t *testing.T) {
	const n = 8
	e := startEngine(t, []string{"--model", "sim", "--executor", "sim", "--max-model-len", "256", "--sim-step-ms", "1",
		"--sim-vocab-size", "500", "--max-num-seqs", "8", "--scheduler-idle-wait", "30s"})
	for i := range n {
		req := &ipc.AddRequest{RequestID: fmt.Sprintf("r%d", i), PromptTokenIDs: []int32{5, 6, 7, int32(8 + i)},
			Params: ipc.SamplingParams{MaxTokens: 4, Logprobs: -1, IgnoreEOS: true}}
		if err := e.conn.Send(ipc.KindAdd, req); err != nil {
			t.Fatal(err)
		}
	}
	first := map[string]uint64{}
	for finished := 0; finished < n; {
		select {
		case o := <-e.conn.Outputs():
			for _, out := range o.Outputs {
				if out.Error != "" {
					t.Fatalf("error output: %s", out.Error)
				}
				if _, ok := first[out.RequestID]; !ok {
					first[out.RequestID] = o.Step
				}
				if out.FinishReason != ipc.FinishNone {
					finished++
				}
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("outputs missing; first steps so far %v", first)
		}
	}
	for id, step := range first {
		if step != first["r0"] {
			t.Errorf("first steps %v: %s started apart from r0", first, id)
			break
		}
	}
	e.stop(t)
	if log := e.stderr.String(); !strings.Contains(log, `"scheduler_idle_wait": "30s"`) {
		t.Errorf("engine ready line lacks the window:\n%s", log)
	}
}

func serve(t *testing.T, args []string, model string, vocab int) {
	e := startEngine(t, args)
	if r := e.ready; (model != "" && r.ModelName != model) || r.MaxModelLen <= 0 || (vocab != 0 && r.VocabSize != vocab) || r.NumKVBlocks <= 0 {
		t.Fatalf("READY %+v", r)
	}
	conn, done, stderr := e.conn, e.done, e.stderr
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
