package engine

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-llm/sluice/configs"
)

// TestRunStartupErrors checks Run's exit status and message for
// configurations that cannot start (the serving path is covered through
// engine-core's main tests and the real-process suites).
func TestRunStartupErrors(t *testing.T) {
	dir := t.TempDir()
	badKey := filepath.Join(dir, "bad.key")
	if err := os.WriteFile(badKey, []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		edit func(c *configs.Engine)
		code int
		want string
	}{
		{"bad log level", func(c *configs.Engine) { c.Model, c.Executor, c.LogLevel = "sim", "sim", "loud" }, 2, "--log-level"},
		{"kv too small", func(c *configs.Engine) { c.Model, c.Executor, c.NumKVBlocks = "sim", "sim", 4 }, 1, "KV cache too small"},
		{"missing model", func(c *configs.Engine) { c.Model, c.Executor = filepath.Join(dir, "absent"), "cpu" }, 1, "load model"},
		{"bad curve key", func(c *configs.Engine) {
			c.Model, c.Executor, c.CurveSecretKeyFile = "sim", "sim", badKey
			c.Listen = "ipc://" + filepath.Join(dir, "e.sock")
		}, 2, "key file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := configs.DefaultEngine()
			tc.edit(&cfg)
			var stderr bytes.Buffer
			code := Run(&cfg, &stderr)
			if code != tc.code || !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("exit %d (want %d), stderr %q (want %q)", code, tc.code, stderr.String(), tc.want)
			}
		})
	}
}
