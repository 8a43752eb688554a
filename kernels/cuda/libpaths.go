package cuda

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Where the CUDA build looks for its run-time libraries. The binary links
// neither libcuda nor libcublas: it dlopens them (kernels/cuda/driver.go),
// trying these candidates in order. The lists are plain Go, so they are
// tested in every build.

// EnvLibCUDA names a driver library (path or soname) tried before the
// usual places; tests point it at a link stub.
const EnvLibCUDA = "SLUICE_LIBCUDA"

// EnvCUBLAS names a cuBLAS library (path or soname) tried before any other.
const EnvCUBLAS = "SLUICE_CUBLAS"

// cublasMajors are the cuBLAS major versions tried, newest first.
func cublasMajors() []string { return []string{"13", "12", "11"} }

// driverCandidates lists the driver libraries to try: $SLUICE_LIBCUDA,
// the soname (the loader's search path and cache), then the folders where
// container runtimes and distributions put the driver.
func driverCandidates(getenv func(string) string) []string {
	return dedupe([]string{
		getenv(EnvLibCUDA),
		"libcuda.so.1",
		"/usr/local/nvidia/lib64/libcuda.so.1",
		"/usr/lib/x86_64-linux-gnu/libcuda.so.1",
		"/usr/lib64/libcuda.so.1",
		"/usr/lib/wsl/lib/libcuda.so.1",
	})
}

// cublasNames lists the cuBLAS libraries tried first: $SLUICE_CUBLAS, then
// libcublas.so.13, .12 and .11 through the loader's search path.
func cublasNames(getenv func(string) string) []string {
	c := []string{getenv(EnvCUBLAS)}
	for _, v := range cublasMajors() {
		c = append(c, "libcublas.so."+v)
	}
	return dedupe(c)
}

// sitePatterns are the Python package folders searched for the pip wheel
// nvidia-cublas (nvidia/cublas/lib), beside those python3 itself reports.
func sitePatterns(getenv func(string) string) []string {
	p := []string{
		"/usr/local/lib/python3*/dist-packages",
		"/usr/local/lib/python3*/site-packages",
		"/usr/lib/python3/dist-packages",
		"/usr/lib/python3*/site-packages",
		"/opt/*/.venv/lib/python3*/site-packages",
		"/opt/*/lib/python3*/site-packages",
		"/opt/conda/lib/python3*/site-packages",
	}
	if home := getenv("HOME"); home != "" {
		p = append(p, filepath.Join(home, ".local/lib/python3*/site-packages"))
	}
	if venv := getenv("VIRTUAL_ENV"); venv != "" {
		p = append(p, filepath.Join(venv, "lib/python3*/site-packages"))
	}
	return p
}

// cublasPaths lists the cuBLAS files that exist in the Python package
// folders (sites, as python3 reports them, then sitePatterns), then in
// $CUDA_HOME/lib64 and /usr/local/cuda/lib64; newest major first within
// each folder. glob is filepath.Glob without its error.
func cublasPaths(getenv func(string) string, sites []string, glob func(string) []string) []string {
	var dirs []string
	for _, s := range sites {
		dirs = append(dirs, filepath.Join(s, "nvidia/cublas/lib"))
	}
	for _, p := range sitePatterns(getenv) {
		for _, s := range glob(p) {
			dirs = append(dirs, filepath.Join(s, "nvidia/cublas/lib"))
		}
	}
	if ch := getenv("CUDA_HOME"); ch != "" {
		dirs = append(dirs, filepath.Join(ch, "lib64"))
	}
	dirs = append(dirs, "/usr/local/cuda/lib64")
	var out []string
	for _, d := range dedupe(dirs) {
		for _, v := range cublasMajors() {
			out = append(out, glob(filepath.Join(d, "libcublas.so."+v))...)
		}
	}
	return dedupe(out)
}

// cublasLtBeside returns the libcublasLt of the same major version in the
// folder of a cuBLAS candidate given as a path ("" for a bare soname or
// when there is none), for loading first.
func cublasLtBeside(cand string) string {
	dir, name := filepath.Split(cand)
	v, ok := strings.CutPrefix(name, "libcublas.so.")
	if dir == "" || !ok {
		return ""
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "libcublasLt.so."+v)); len(m) == 1 {
		return m[0]
	}
	return ""
}

// pythonSitePackages asks python3 for its package folders (the wheel
// nvidia-cublas lives in one); nil when there is no python3.
func pythonSitePackages() []string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "python3", "-c",
		"import site, sys\nprint('\\n'.join(site.getsitepackages() + [site.getusersitepackages()] + sys.path))").Output()
	if err != nil {
		return nil
	}
	var dirs []string
	for _, l := range strings.Split(string(out), "\n") {
		if l = strings.TrimSpace(l); strings.HasSuffix(l, "-packages") {
			dirs = append(dirs, l)
		}
	}
	return dirs
}

// globFiles is filepath.Glob without its error (only a malformed pattern
// makes one, and the patterns here are fixed).
func globFiles(pattern string) []string {
	m, _ := filepath.Glob(pattern)
	return m
}

// dedupe drops empty and repeated entries, keeping the first of each.
func dedupe(s []string) []string {
	seen := map[string]bool{}
	out := s[:0:0]
	for _, x := range s {
		if x != "" && !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}
