//go:build !cuda

package cudaexec

import (
	"errors"
	"testing"

	"github.com/sluice-llm/sluice/engine-core/runner"
	"github.com/sluice-llm/sluice/kernels/cuda"
)

func TestNewWithoutTagFailsClearly(t *testing.T) {
	r, err := New(runner.Config{Model: "demo-tiny"}, cuda.Options{})
	if r != nil || !errors.Is(err, cuda.ErrNotCompiled) {
		t.Fatalf("New = %v, %v; want nil and cuda.ErrNotCompiled", r, err)
	}
	t.Logf("error: %v", err)
}
