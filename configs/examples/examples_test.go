package examples

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/sluice-llm/sluice/configs"
)

// hasFlag reports whether the config struct has a field for the flag.
func hasFlag(cfg any, name string) bool {
	t := reflect.TypeOf(cfg).Elem()
	for i := 0; i < t.NumField(); i++ {
		if t.Field(i).Tag.Get("flag") == name {
			return true
		}
	}
	return false
}

func TestEngineExample(t *testing.T) {
	cfg := configs.DefaultEngine()
	if _, err := configs.Load("engine-core", []string{"--config", "engine.yaml"}, &cfg, nil); err != nil {
		t.Fatal(err)
	}
	if cfg.Model != "demo" || cfg.Listen != "ipc:///run/sluice/engine.sock" || cfg.MaxNumSeqs != 64 ||
		cfg.KVCacheMemory != 2<<30 || cfg.ShutdownTimeout != 30*time.Second {
		t.Fatalf("engine.yaml loaded as %+v", cfg)
	}
}

func TestFrontendExamples(t *testing.T) {
	tests := []struct {
		file    string
		engines []string // nil: spawn
		check   func(t *testing.T, f *configs.Frontend)
	}{
		{"frontend.yaml", []string{"ipc:///run/sluice/engine.sock"}, func(t *testing.T, f *configs.Frontend) {
			if f.Port != 8000 || f.EngineLiveness != 3*time.Second || f.ServedModelName != "demo" {
				t.Errorf("loaded as %+v", f)
			}
		}},
		{"frontend-dp.yaml", []string{"ipc:///run/sluice/engine-0.sock", "tcp://10.0.0.12:5555"}, nil},
		{"launcher.yaml", nil, func(t *testing.T, f *configs.Frontend) {
			want := []string{"--model", "demo", "--executor", "cpu", "--max-num-seqs", "64", "--kv-cache-memory", "2GiB"}
			if got := append([]string{"--model", f.Model}, f.SpawnArgs()...); !slices.Equal(got, want) {
				t.Errorf("engine arguments %q, want %q", got, want)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			cfg := configs.DefaultFrontend()
			if tt.file == "launcher.yaml" && !hasFlag(&cfg, "api-server-count") {
				t.Skip("configs.Frontend has no api_server_count field yet")
			}
			if _, err := configs.Load("api-frontend", []string{"--config", tt.file}, &cfg, nil); err != nil {
				t.Fatal(err)
			}
			if got := cfg.EngineAddrs(); !slices.Equal(got, tt.engines) {
				t.Errorf("engines %q, want %q", got, tt.engines)
			}
			if tt.check != nil {
				tt.check(t, &cfg)
			}
		})
	}
}
