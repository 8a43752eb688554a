package configs

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestFrontendValidate(t *testing.T) {
	cases := []struct {
		name    string
		edit    func(*Frontend)
		wantErr string // substring; "" means valid
	}{
		{"defaults with model", func(*Frontend) {}, ""},
		{"no model", func(f *Frontend) { f.Model = "" }, "--model"},
		{"bad port", func(f *Frontend) { f.Port = 70000 }, "--port"},
		{"zero interval", func(f *Frontend) { f.StreamInterval = 0 }, "--stream-interval"},
		{"gc off", func(f *Frontend) { f.GCPercent = -1 }, ""},
		{"bad gc percent", func(f *Frontend) { f.GCPercent = -2 }, "--gc-percent"},
		{"procs all", func(f *Frontend) { f.Procs = "all" }, ""},
		{"bad procs", func(f *Frontend) { f.Procs = "2" }, "--procs"},
		{"bad reasoning field", func(f *Frontend) { f.ReasoningField = "thoughts" }, "--reasoning-field"},
		{"lean http server", func(f *Frontend) { f.HTTPServer = "lean" }, ""},
		{"net/http server", func(f *Frontend) { f.HTTPServer = "net/http" }, ""},
		{"bad http server", func(f *Frontend) { f.HTTPServer = "fast" }, "--http-server"},
		{"libzmq engine link", func(f *Frontend) { f.EngineLink = "libzmq" }, ""},
		{"bad engine link", func(f *Frontend) { f.EngineLink = "nanomsg" }, "--engine-link"},
		{"bad JSON whitespace", func(f *Frontend) { f.StructuredOutputsWhitespace = "loose" }, "--structured-outputs-whitespace"},
		{"auto tools without parser", func(f *Frontend) { f.EnableAutoToolChoice = true }, "--tool-call-parser"},
		{"negative queue", func(f *Frontend) { f.MaxQueuedRequests = -1 }, "--max-queued-requests"},
		{"zero stop strings", func(f *Frontend) { f.MaxStopStrings = 0 }, "--max-stop-strings"},
		{"zero logit bias", func(f *Frontend) { f.MaxLogitBias = 0 }, "--max-logit-bias"},
		{"negative seqs", func(f *Frontend) { f.MaxSeqsPerRequest = -1 }, "--max-seqs-per-request"},
		{"zero tokenize body", func(f *Frontend) { f.MaxTokenizeBodyBytes = 0 }, "--max-tokenize-body-bytes"},
		{"bad log format", func(f *Frontend) { f.LogFormat = "xml" }, "--log-format"},
		{"negative shutdown", func(f *Frontend) { f.ShutdownTimeout = -time.Second }, "--shutdown-timeout"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := DefaultFrontend()
			f.Model = "demo"
			tc.edit(&f)
			err := f.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one naming %s", err, tc.wantErr)
			}
		})
	}
}

func TestFrontendEngineArgs(t *testing.T) {
	f := DefaultFrontend()
	if f.EngineAddrs() != nil {
		t.Fatal("spawn must give no addresses")
	}
	f.Engine = "ipc:///a.sock, tcp://h:5555,"
	if got := f.EngineAddrs(); !slices.Equal(got, []string{"ipc:///a.sock", "tcp://h:5555"}) {
		t.Fatalf("addrs %q", got)
	}
	f.Executor, f.MaxNumSeqs, f.SimStepMS, f.SimScript, f.KVCacheDType = "sim", 64, 2.5, "s.jsonl", "float16"
	f.SchedulerIdleWait = "2ms"
	f.LongPrefillTokenThreshold, f.MaxNumPartialPrefills, f.MaxLongPartialPrefills = "128", 4, 2
	f.PrefillTokensBesideDecodes = "64"
	want := []string{"--executor", "sim", "--max-num-seqs", "64", "--kv-cache-dtype", "float16",
		"--long-prefill-token-threshold", "128", "--prefill-tokens-beside-decodes", "64",
		"--max-num-partial-prefills", "4", "--max-long-partial-prefills", "2",
		"--scheduler-idle-wait", "2ms",
		"--sim-step-ms", "2.5", "--sim-script", "s.jsonl"}
	if got := f.SpawnArgs(); !slices.Equal(got, want) {
		t.Fatalf("spawn args %q, want %q", got, want)
	}
}

func TestFrontendLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "fe.yaml")
	if err := os.WriteFile(path, []byte("model: demo\nstream_interval: 4\nport: 9000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SLUICE_API_KEY", "from-env")
	f := DefaultFrontend()
	if _, err := Load("api-frontend", []string{"--config", path, "--port", "9001", "--shutdown-timeout", "2s"}, &f, nil); err != nil {
		t.Fatal(err)
	}
	if f.Model != "demo" || f.StreamInterval != 4 || f.Port != 9001 || f.APIKey != "from-env" || f.ShutdownTimeout != 2*time.Second {
		t.Fatalf("loaded %+v", f)
	}
}
