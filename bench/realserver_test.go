package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-llm/sluice/internal/testenv"
)

// buildServer builds engine-core and api-frontend (or takes them from
// $SLUICE_E2E_BIN) and returns their directory.
func buildServer(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("SLUICE_E2E_BIN"); dir != "" {
		return dir
	}
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", dir+string(os.PathSeparator), "./engine-core", "./api-frontend")
	cmd.Dir = testenv.RepoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build servers: %v\n%s", err, out)
	}
	return dir
}

// startServer starts api-frontend (which spawns its engine-core) with args
// on a free loopback port and returns its base URL once /health answers.
func startServer(t *testing.T, bin string, args ...string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	var log bytes.Buffer
	cmd := exec.Command(filepath.Join(bin, "api-frontend"), append(args, "--host", "127.0.0.1", "--port", fmt.Sprint(port))...)
	cmd.Stdout, cmd.Stderr = &log, &log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start api-frontend: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("api-frontend output:\n%s", log.String())
		}
	})
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		resp, err := http.Get(base + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base
			}
		}
		select {
		case <-exited:
			t.Fatalf("api-frontend exited before /health answered:\n%s", log.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/health did not answer 200 within 2m", base)
		}
	}
}

// TestCLIServeRealServer runs the README's `bench serve` command (random
// dataset, no --tokenizer) against real Sluice servers whose vocabularies
// are far smaller than a Llama's: the built-in demo models (vocabulary 512)
// and a real llama2.c checkpoint. The prompts must come from the served
// model's tokenizer (found through /v1/models, /tokenize and /detokenize),
// so every request completes with prompts of the requested length.
func TestCLIServeRealServer(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIP: builds and runs engine-core and api-frontend; not run with -short")
	}
	bin := buildServer(t)
	chatToo := []string{"/v1/completions", "/v1/chat/completions"}
	cases := []struct {
		name      string
		vocab     int
		endpoints []string // stories260K has no chat template
		args      func(t *testing.T) []string
	}{
		{"demo", 512, chatToo, func(*testing.T) []string { return []string{"--model", "demo"} }},
		{"demo-15m", 32000, chatToo, func(*testing.T) []string { return []string{"--model", "demo-15m"} }},
		{"stories260K", 512, []string{"/v1/completions"}, func(t *testing.T) []string {
			return []string{"--model", testenv.SharedFile(t, "stories260K/stories260K.bin"),
				"--tokenizer", testenv.SharedFile(t, "stories260K/tok512.bin")}
		}},
	}
	const prompts, inLen, outLen = 6, 24, 8
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := append(tc.args(t), "--executor", "cpu", "--max-num-seqs", "8")
			base := startServer(t, bin, args...)
			for _, endpoint := range tc.endpoints {
				result := filepath.Join(t.TempDir(), "r.json")
				var out bytes.Buffer
				err := run(context.Background(), []string{"serve", "--base-url", base, "--endpoint", endpoint,
					"--dataset-name", "random", "--random-input-len", fmt.Sprint(inLen), "--random-output-len", fmt.Sprint(outLen),
					"--num-prompts", fmt.Sprint(prompts), "--ignore-eos", "--disable-tqdm", "--result-json", result}, &out, io.Discard)
				if err != nil {
					t.Fatalf("%s: serve: %v\n%s", endpoint, err, out.String())
				}
				if want := fmt.Sprintf("Random prompts from the server's tokenizer (vocabulary of %d)", tc.vocab); !strings.Contains(out.String(), want) {
					t.Errorf("%s: output does not say the prompts came from the server's tokenizer:\n%s", endpoint, out.String())
				}
				b, err := os.ReadFile(result)
				if err != nil {
					t.Fatal(err)
				}
				var m struct {
					Completed   int   `json:"completed"`
					Failed      int   `json:"failed"`
					InputLens   []int `json:"input_lens"`
					OutputLens  []int `json:"output_lens"`
					TotalOutput int   `json:"total_output_tokens"`
				}
				if err := json.Unmarshal(b, &m); err != nil {
					t.Fatal(err)
				}
				if m.Completed != prompts || m.Failed != 0 || m.TotalOutput != prompts*outLen {
					t.Fatalf("%s: completed %d failed %d output tokens %d, want %d, 0, %d\n%s", endpoint, m.Completed, m.Failed, m.TotalOutput, prompts, prompts*outLen, out.String())
				}
				for i, n := range m.InputLens {
					// Completions prompts fit the requested length exactly
					// (re-tokenized); chat adds the template's tokens.
					if endpoint == "/v1/completions" && n != inLen || n < inLen {
						t.Errorf("%s: request %d: prompt of %d tokens, want %d", endpoint, i, n, inLen)
					}
				}
			}
		})
	}
}
