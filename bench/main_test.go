package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-llm/sluice/bench/stub"
	"github.com/sluice-llm/sluice/internal/testenv"
	"go.uber.org/goleak"
)

func TestCLIServe(t *testing.T) {
	srv := httptest.NewServer(stub.New(stub.Options{FirstDelay: 5 * time.Millisecond, Interval: time.Millisecond, TokensPerChunk: 2}))
	defer srv.Close()
	result := filepath.Join(t.TempDir(), "r.json")
	var out bytes.Buffer
	err := run(context.Background(), []string{"serve",
		"--base-url", srv.URL, "--model", "m", "--dataset-name", "random", "--random-input-len", "8",
		"--random-output-len", "6", "--num-prompts", "5", "--max-concurrency", "2", "--request-rate", "500",
		"--burstiness", "0.5", "--seed", "9", "--ignore-eos", "--goodput", "ttft:1000", "tpot:1000",
		"--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,99",
		"--result-json", result, "--disable-tqdm", "--ready-check-timeout-sec", "0",
	}, &out, io.Discard)
	if err != nil {
		t.Fatalf("serve: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		"Burstiness factor: 0.5 (Gamma distribution)",
		"Request rate configured (RPS):           500.00",
		"Request goodput (req/s):",
		"Successful requests:                     5",
		"P90 E2EL (ms):",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	b, err := os.ReadFile(result)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m["completed"].(float64) != 5 || m["total_output_tokens"].(float64) != 30 || m["request_goodput"] == nil {
		t.Errorf("result JSON completed=%v total_output_tokens=%v goodput=%v", m["completed"], m["total_output_tokens"], m["request_goodput"])
	}
}

func TestCLISweep(t *testing.T) {
	srv := httptest.NewServer(stub.New(stub.Options{Interval: time.Millisecond}))
	defer srv.Close()
	dir := t.TempDir()
	var out bytes.Buffer
	err := run(context.Background(), []string{"sweep", "--concurrencies", "1,3", "--base-url", srv.URL,
		"--model", "m", "--random-input-len", "4", "--random-output-len", "3", "--output-dir", dir,
		"--disable-tqdm", "--ready-check-timeout-sec", "0", "--prompts-per-concurrency", "2"}, &out, io.Discard)
	if err != nil {
		t.Fatalf("sweep: %v\n%s", err, out.String())
	}
	for _, f := range []string{"sweep.json", "sweep.csv", "throughput.svg", "ttft.svg", "conc-3.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	if !strings.Contains(out.String(), "\n       3 | ") {
		t.Errorf("no row for concurrency 3:\n%s", out.String())
	}
}

func TestCLIErrors(t *testing.T) {
	for _, args := range [][]string{
		nil,
		{"nonsense"},
		{"serve", "--endpoint", "/v1/embeddings"},
		{"serve", "--no-such-flag"},
		{"serve", "--tokenizer", "/no/such/tokenizer"},
		{"sweep", "--concurrencies", "x"},
		{"serve", "extra-arg"},
	} {
		err := run(context.Background(), args, io.Discard, io.Discard)
		if err == nil {
			t.Errorf("run(%q) succeeded", args)
		}
	}
	if err := run(context.Background(), []string{"serve", "-h"}, io.Discard, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("serve -h: %v", err)
	}
}

// TestCLITokenizer builds text prompts with a real tokenizer (Llama-2's,
// llama2.c format) and counts output tokens with it when the server sends no
// usage.
func TestCLITokenizer(t *testing.T) {
	tokDir := testenv.SharedFile(t, "tokenizers/llama2-sentencepiece/tokenizer.bin")
	tok, err := loadTokenizer(tokDir)
	if err != nil {
		t.Fatal(err)
	}
	wantOut := len(tok.Encode(strings.Repeat(" tok", 6), false))
	srv := httptest.NewServer(stub.New(stub.Options{Interval: time.Millisecond, NoUsage: true}))
	defer srv.Close()
	result := filepath.Join(t.TempDir(), "r.json")
	var out bytes.Buffer
	err = run(context.Background(), []string{"serve", "--base-url", srv.URL, "--model", "m",
		"--tokenizer", tokDir, "--random-input-len", "40", "--random-output-len", "6", "--num-prompts", "4",
		"--disable-tqdm", "--ready-check-timeout-sec", "0", "--result-json", result}, &out, io.Discard)
	if err != nil {
		t.Fatalf("serve: %v\n%s", err, out.String())
	}
	b, err := os.ReadFile(result)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		OutputLens []int  `json:"output_lens"`
		InputLens  []int  `json:"input_lens"`
		Tokenizer  string `json:"tokenizer_id"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	// The stub streams " tok" six times.
	for i, n := range m.OutputLens {
		if n != wantOut || n < 6 {
			t.Errorf("request %d: %d output tokens counted with the tokenizer, want %d", i, n, wantOut)
		}
	}
	for i, n := range m.InputLens {
		if n < 36 || n > 44 {
			t.Errorf("request %d: prompt of %d tokens, want about 40", i, n)
		}
	}
	if m.Tokenizer != tokDir {
		t.Errorf("tokenizer_id %q", m.Tokenizer)
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
