package cpu

import (
	"flag"
	"os"
	"testing"

	"github.com/sluice-llm/sluice/kernels/cpu/internal/asmgen"
)

//go:generate go run ./internal/asmgen/cmd/asmgen

var update = flag.Bool("update", false, "rewrite the generated assembly files")

// TestGenerated checks that the generated assembly files are what asmgen
// writes (go generate ./kernels/cpu, or go test -run TestGenerated -update,
// rewrites them).
func TestGenerated(t *testing.T) {
	for name, want := range asmgen.Files() {
		if *update {
			if err := os.WriteFile(name, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Errorf("%s differs from asmgen's output: run go test ./kernels/cpu -run TestGenerated -update", name)
		}
	}
}
