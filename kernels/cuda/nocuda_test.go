//go:build !cuda

package cuda

import (
	"errors"
	"strings"
	"testing"
)

func TestNewWithoutTagSaysHowToBuild(t *testing.T) {
	be, err := New(Options{})
	if be != nil || !errors.Is(err, ErrNotCompiled) {
		t.Fatalf("New = %v, %v; want nil, ErrNotCompiled", be, err)
	}
	for _, want := range []string{"-tags cuda", "build:cuda"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if Compiled {
		t.Error("Compiled is true in a build without the cuda tag")
	}
}
