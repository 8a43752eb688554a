package configs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestEngineDefaultsValid(t *testing.T) {
	e := DefaultEngine()
	e.Model = "demo"
	if err := e.Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
}

func TestEngineValidateNamesField(t *testing.T) {
	cases := []struct {
		flag string
		mod  func(e *Engine)
	}{
		{"--model", func(e *Engine) { e.Model = "" }},
		{"--executor", func(e *Engine) { e.Executor = "gpu" }},
		{"--max-num-seqs", func(e *Engine) { e.MaxNumSeqs = 0 }},
		{"--max-num-batched-tokens", func(e *Engine) { e.MaxNumBatchedTokens = -1 }},
		{"--max-model-len", func(e *Engine) { e.MaxModelLen = 1 }},
		{"--block-size", func(e *Engine) { e.BlockSize = 0 }},
		{"--kv-cache-memory", func(e *Engine) { e.KVCacheMemory = -5 }},
		{"--kv-cache-dtype", func(e *Engine) { e.KVCacheDType = "int4" }},
		{"--num-kv-blocks", func(e *Engine) { e.NumKVBlocks = -1 }},
		{"--sim-step-ms", func(e *Engine) { e.SimStepMS = -1 }},
		{"--sim-eos-prob", func(e *Engine) { e.SimEOSProb = 2 }},
		{"--sim-script", func(e *Engine) { e.SimScript = "x.jsonl" }},
		{"--sim-token-min", func(e *Engine) { e.SimTokenMin, e.SimTokenMax = 9, 3 }},
		{"--log-format", func(e *Engine) { e.LogFormat = "text" }},
		{"--log-level", func(e *Engine) { e.LogLevel = "loud" }},
		{"--scheduler-idle-wait", func(e *Engine) { e.SchedulerIdleWait = "5" }},
		{"--scheduler-idle-wait", func(e *Engine) { e.SchedulerIdleWait = "-1ms" }},
		{"--scheduler-idle-wait", func(e *Engine) { e.SchedulerIdleWait = "2m" }},
		{"--long-prefill-token-threshold", func(e *Engine) { e.LongPrefillTokenThreshold = "-1" }},
		{"--long-prefill-token-threshold", func(e *Engine) { e.LongPrefillTokenThreshold = "big" }},
		{"--prefill-tokens-beside-decodes", func(e *Engine) { e.PrefillTokensBesideDecodes = "-3" }},
		{"--max-num-partial-prefills", func(e *Engine) { e.MaxNumPartialPrefills = 0 }},
		{"--max-long-partial-prefills", func(e *Engine) { e.MaxLongPartialPrefills = 0 }},
		{"--max-long-partial-prefills", func(e *Engine) { e.MaxNumPartialPrefills, e.MaxLongPartialPrefills = 2, 3 }},
	}
	for _, tc := range cases {
		t.Run(tc.flag, func(t *testing.T) {
			e := DefaultEngine()
			e.Model = "demo"
			tc.mod(&e)
			err := e.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.flag) {
				t.Fatalf("error %v, want one naming %s", err, tc.flag)
			}
		})
	}
}

// TestEngineIdleWait checks how --scheduler-idle-wait resolves per
// executor.
func TestEngineIdleWait(t *testing.T) {
	for _, c := range []struct {
		executor, flag string
		want           time.Duration
	}{
		{"cpu", "auto", DefaultCPUIdleWait},
		{"cpu", "", DefaultCPUIdleWait},
		{"sim", "auto", 0},
		{"cuda", "auto", 0},
		{"cpu", "0", 0},
		{"sim", "2ms", 2 * time.Millisecond},
		{"cpu", "750us", 750 * time.Microsecond},
	} {
		e := DefaultEngine()
		e.Executor, e.SchedulerIdleWait = c.executor, c.flag
		if got, err := e.IdleWait(); err != nil || got != c.want {
			t.Errorf("%s with %q: %v, %v; want %v", c.executor, c.flag, got, err, c.want)
		}
	}
}

// TestEngineLongPrefillThreshold checks how --long-prefill-token-threshold
// and --prefill-tokens-beside-decodes resolve per executor: auto is
// CPU-sized, a number is taken as given.
func TestEngineLongPrefillThreshold(t *testing.T) {
	for _, c := range []struct {
		executor, flag string
		want           int
	}{
		{"cpu", "auto", DefaultCPULongPrefillTokenThreshold},
		{"cpu", "", DefaultCPULongPrefillTokenThreshold},
		{"sim", "auto", 0},
		{"cuda", "auto", 0},
		{"cpu", "0", 0},
		{"cpu", "2048", 2048},
		{"sim", " 64 ", 64},
	} {
		e := DefaultEngine()
		e.Executor, e.LongPrefillTokenThreshold, e.PrefillTokensBesideDecodes = c.executor, c.flag, c.flag
		if got, err := e.LongPrefillThreshold(); err != nil || got != c.want {
			t.Errorf("%s with %q: %v, %v; want %v", c.executor, c.flag, got, err, c.want)
		}
		if got, err := e.PrefillBesideDecodes(); err != nil || got != c.want {
			t.Errorf("beside decodes: %s with %q: %v, %v; want %v", c.executor, c.flag, got, err, c.want)
		}
	}
}

func TestEngineLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "engine.yaml")
	if err := os.WriteFile(path, []byte("model: demo\nexecutor: sim\nmax_num_seqs: 8\nkv_cache_memory: 1GiB\nsim_step_ms: 2.5\nlong_prefill_token_threshold: 512\nmax_num_partial_prefills: 4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SLUICE_MAX_NUM_SEQS", "16")
	e := DefaultEngine()
	rest, err := Load("engine-core", []string{"--config", path, "--block-size", "32", "--shutdown-timeout", "5s"}, &e, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rest) != 0 || e.Model != "demo" || e.Executor != "sim" || e.MaxNumSeqs != 16 || e.KVCacheMemory != 1<<30 ||
		e.BlockSize != 32 || e.ShutdownTimeout != 5*time.Second || e.SimStep() != 2500*time.Microsecond ||
		e.LongPrefillTokenThreshold != "512" || e.MaxNumPartialPrefills != 4 {
		t.Fatalf("loaded %+v", e)
	}
}
