// Package testenv locates test fixtures that live outside the repository,
// chiefly ../shared/models, the small real checkpoints and tokenizers that
// tests with real weights use. Tests that need them call SharedModels, which
// skips the test with a clear message where the folder is absent, so such
// tests never pass silently without having run.
package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// RepoRoot returns the directory holding the module's go.mod, found by
// walking up from the working directory.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatalf("getwd: %v", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatalf("go.mod not found above the working directory")
		}
		dir = parent
	}
}

// SharedModels returns the path of ../shared/models (or $SLUICE_SHARED_MODELS),
// skipping the test with a clear message when it is absent.
func SharedModels(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("SLUICE_SHARED_MODELS")
	if dir == "" {
		dir = filepath.Join(filepath.Dir(RepoRoot(t)), "shared", "models")
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		t.Skipf("SKIP: real-model fixtures not found at %s (they live in ../shared/models beside the repository; set SLUICE_SHARED_MODELS to point elsewhere)", dir)
	}
	return dir
}

// SharedFile returns a file under SharedModels, skipping when it is missing.
func SharedFile(t testing.TB, rel string) string {
	t.Helper()
	p := filepath.Join(SharedModels(t), rel)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("SKIP: fixture %s not found", p)
	}
	return p
}
