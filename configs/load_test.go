package configs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type embedded struct {
	Shared string `flag:"shared" usage:"shared"`
}

type testConfig struct {
	embedded
	Port     int           `flag:"port" yaml:"port" usage:"port"`
	Rate     float64       `flag:"rate" yaml:"rate"`
	Name     string        `flag:"served-model-name" yaml:"served_model_name"`
	Enabled  bool          `flag:"enabled"`
	Timeout  time.Duration `flag:"timeout"`
	Engines  []string      `flag:"engine"`
	KVMemory int64         `flag:"kv-cache-memory"`
}

func (c *testConfig) Validate() error {
	if c.Port <= 0 || c.Port > 65535 {
		return Errorf("port", "must be in 1..65535, got %d", c.Port)
	}
	return nil
}

func TestLoadPrecedence(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yaml")
	os.WriteFile(path, []byte("port: 9000\nrate: 1.5\nserved_model_name: fromfile\nengine: [a, b]\nkv-cache-memory: 2GiB\nshared: s\n"), 0o644)
	t.Setenv("SLUICE_RATE", "2.5")
	t.Setenv("SLUICE_SERVED_MODEL_NAME", "fromenv")
	c := &testConfig{Port: 8000, Timeout: time.Second}
	rest, err := Load("t", []string{"--config", path, "--served-model-name", "fromflag", "--enabled", "--timeout=3s", "pos"}, c, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Port != 9000 || c.Rate != 2.5 || c.Name != "fromflag" || !c.Enabled || c.Timeout != 3*time.Second ||
		strings.Join(c.Engines, "|") != "a|b" || c.KVMemory != 2<<30 || c.Shared != "s" || len(rest) != 1 || rest[0] != "pos" {
		t.Fatalf("got %+v rest %v", c, rest)
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("prot: 1\n"), 0o644)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--port", "0"}, "--port: must be in 1..65535"},
		{[]string{"--port", "x"}, "invalid value"},
		{[]string{"--nope"}, "flag provided but not defined: -nope"},
		{[]string{"--config", bad}, `unknown field "prot"`},
		{[]string{"--config", filepath.Join(dir, "missing.yaml")}, "read config"},
	}
	for _, tc := range cases {
		c := &testConfig{Port: 8000}
		_, err := Load("t", tc.args, c, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err %v, want %q", tc.args, err, tc.want)
		}
	}
}

func TestParseInt(t *testing.T) {
	for in, want := range map[string]int64{"12": 12, "4k": 4096, "1.5GiB": 3 << 29, "512MB": 512e6, "2g": 2 << 30} {
		got, err := parseInt(in)
		if err != nil || got != want {
			t.Errorf("%s: %d %v, want %d", in, got, err, want)
		}
	}
}
