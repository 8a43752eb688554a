package cuda

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestDriverCandidates(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		head []string
	}{
		{"default", nil, []string{"libcuda.so.1", "/usr/local/nvidia/lib64/libcuda.so.1"}},
		{"env first", map[string]string{EnvLibCUDA: "/stubs/libcuda.so"}, []string{"/stubs/libcuda.so", "libcuda.so.1"}},
		{"env equal to the soname is not repeated", map[string]string{EnvLibCUDA: "libcuda.so.1"}, []string{"libcuda.so.1", "/usr/local/nvidia/lib64/libcuda.so.1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := driverCandidates(envOf(tc.env))
			if !slices.Equal(got[:len(tc.head)], tc.head) {
				t.Fatalf("driverCandidates = %v, want it to start with %v", got, tc.head)
			}
			if len(dedupe(slices.Clone(got))) != len(got) {
				t.Fatalf("driverCandidates has repeats: %v", got)
			}
		})
	}
}

func TestCUBLASNames(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"sonames newest first", nil, []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so.11"}},
		{"$SLUICE_CUBLAS first", map[string]string{EnvCUBLAS: "/x/libcublas.so.12"},
			[]string{"/x/libcublas.so.12", "libcublas.so.13", "libcublas.so.12", "libcublas.so.11"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := cublasNames(envOf(tc.env)); !slices.Equal(got, tc.want) {
				t.Fatalf("cublasNames = %v, want %v", got, tc.want)
			}
		})
	}
}

// touch creates the files (and their folders) under root.
func touch(t *testing.T, root string, files ...string) {
	t.Helper()
	for _, f := range files {
		p := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCUBLASPaths lays out fake Python site folders and CUDA homes and
// checks which cuBLAS files are found, in which order.
func TestCUBLASPaths(t *testing.T) {
	root := t.TempDir()
	venv := filepath.Join(root, "venv/lib/python3.12/site-packages")
	home := filepath.Join(root, "home")
	cudaHome := filepath.Join(root, "cuda")
	touch(t, root,
		"venv/lib/python3.12/site-packages/nvidia/cublas/lib/libcublas.so.13",
		"venv/lib/python3.12/site-packages/nvidia/cublas/lib/libcublasLt.so.13",
		"venv/lib/python3.12/site-packages/nvidia/cublas/lib/libcublas.so.12",
		"home/.local/lib/python3.11/site-packages/nvidia/cublas/lib/libcublas.so.12",
		"home/.local/lib/python3.11/site-packages/nvidia/cublas/lib/libcublas.so.12.1.3.1", // not a soname: skipped
		"cuda/lib64/libcublas.so.11",
		"empty/lib/python3.12/site-packages/nvidia/cublas/lib/README",
	)
	for _, tc := range []struct {
		name  string
		env   map[string]string
		sites []string
		want  []string
	}{
		{"nothing anywhere", nil, []string{filepath.Join(root, "empty/lib/python3.12/site-packages")}, nil},
		{"python3's site folder, newest major first", nil, []string{venv}, []string{
			filepath.Join(venv, "nvidia/cublas/lib/libcublas.so.13"),
			filepath.Join(venv, "nvidia/cublas/lib/libcublas.so.12"),
		}},
		{"user site from $HOME, then $CUDA_HOME", map[string]string{"HOME": home, "CUDA_HOME": cudaHome}, nil, []string{
			filepath.Join(home, ".local/lib/python3.11/site-packages/nvidia/cublas/lib/libcublas.so.12"),
			filepath.Join(cudaHome, "lib64/libcublas.so.11"),
		}},
		{"$VIRTUAL_ENV, reported twice, listed once", map[string]string{"VIRTUAL_ENV": filepath.Join(root, "venv")}, []string{venv}, []string{
			filepath.Join(venv, "nvidia/cublas/lib/libcublas.so.13"),
			filepath.Join(venv, "nvidia/cublas/lib/libcublas.so.12"),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Only the fake tree counts: the machine's own folders are
			// filtered out so the test means the same everywhere.
			glob := func(p string) []string {
				var in []string
				for _, m := range globFiles(p) {
					if rel, err := filepath.Rel(root, m); err == nil && filepath.IsLocal(rel) {
						in = append(in, m)
					}
				}
				return in
			}
			got := cublasPaths(envOf(tc.env), tc.sites, glob)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("cublasPaths =\n%v\nwant\n%v", got, tc.want)
			}
		})
	}
	lt := filepath.Join(venv, "nvidia/cublas/lib/libcublasLt.so.13")
	for cand, want := range map[string]string{
		filepath.Join(venv, "nvidia/cublas/lib/libcublas.so.13"): lt,
		filepath.Join(venv, "nvidia/cublas/lib/libcublas.so.12"): "", // no Lt of that major
		"libcublas.so.13": "", // a soname: the loader finds Lt itself
	} {
		if got := cublasLtBeside(cand); got != want {
			t.Errorf("cublasLtBeside(%q) = %q, want %q", cand, got, want)
		}
	}
}

func TestSitePatternsFollowEnv(t *testing.T) {
	p := sitePatterns(envOf(map[string]string{"HOME": "/h", "VIRTUAL_ENV": "/v"}))
	for _, want := range []string{"/h/.local/lib/python3*/site-packages", "/v/lib/python3*/site-packages", "/usr/local/lib/python3*/dist-packages"} {
		if !slices.Contains(p, want) {
			t.Errorf("sitePatterns lacks %s: %v", want, p)
		}
	}
}
