package modelref

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestResolve: paths come back unchanged (also an "org/name" that exists
// on disk), and a Hub id with nothing cached and the Hub offline fails
// with an error that names the download.
func TestResolve(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("HF_HOME", filepath.Join(dir, "hf"))
	t.Setenv("HF_HUB_OFFLINE", "1")
	local := filepath.Join(dir, "org", "name")
	if err := os.MkdirAll(local, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	cases := []struct {
		ref, want, err string
	}{
		{ref: "/models/llama.gguf", want: "/models/llama.gguf"},
		{ref: "org/name", want: "org/name"}, // exists here: a path, not a Hub id
		{ref: "nobody/missing-model", err: "download nobody/missing-model"},
	}
	for _, c := range cases {
		got, err := Resolve(context.Background(), c.ref)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("Resolve(%q) error %v, want one containing %q", c.ref, err, c.err)
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("Resolve(%q) = %q, %v; want %q", c.ref, got, err, c.want)
		}
	}
}
