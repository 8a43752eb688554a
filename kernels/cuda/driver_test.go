//go:build cuda

package cuda

// Tests of the run-time loading of the driver and cuBLAS that run on any
// machine: scripts/cuda-check.sh points SLUICE_CUDA_STUBS at the toolkit's
// link stubs (Debian CUDA 11.8), whose libcuda.so and libcublas.so export
// every entry point but whose cuInit fails with CUDA_ERROR_STUB_LIBRARY.

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// stubDir is the folder of the toolkit's link stubs, or the test skips.
func stubDir(t *testing.T) string {
	t.Helper()
	d := os.Getenv("SLUICE_CUDA_STUBS")
	if d == "" {
		t.Skip("SLUICE_CUDA_STUBS is not set (scripts/cuda-check.sh sets it to the CUDA toolkit's stubs folder)")
	}
	return d
}

// TestNoLibraries: with nothing to load, the errors say what is missing and
// list every place tried. It must run before the stub tests: once a stub
// is loaded, dlopen finds it again by its soname (libcuda.so.1,
// libcublas.so.11) in the same process.
func TestNoLibraries(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "libcuda.so.1")
	t.Setenv(EnvLibCUDA, missing)
	t.Run("driver", func(t *testing.T) {
		_, err := loadDriver()
		if err == nil {
			t.Skip("a driver library is installed on this machine")
		}
		if !errors.Is(err, ErrNoDriver) {
			t.Fatalf("loadDriver: %v, want an ErrNoDriver", err)
		}
		for _, c := range driverCandidates(os.Getenv) {
			if !strings.Contains(err.Error(), c) {
				t.Errorf("error does not name %s: %v", c, err)
			}
		}
	})
	t.Run("cublas", func(t *testing.T) {
		t.Setenv(EnvCUBLAS, filepath.Join(t.TempDir(), "libcublas.so.13"))
		_, err := loadCUBLAS()
		if err == nil {
			t.Skip("a cuBLAS library is installed on this machine")
		}
		if !errors.Is(err, ErrNoCUBLAS) {
			t.Fatalf("loadCUBLAS: %v, want an ErrNoCUBLAS", err)
		}
		for _, c := range cublasNames(os.Getenv) {
			if !strings.Contains(err.Error(), c) {
				t.Errorf("error does not name %s: %v", c, err)
			}
		}
		if !strings.Contains(err.Error(), EnvCUBLAS) {
			t.Errorf("error does not say how to point at cuBLAS: %v", err)
		}
	})
	t.Run("wrong library", func(t *testing.T) {
		t.Setenv(EnvCUBLAS, "libc.so.6")
		_, err := loadCUBLAS()
		if err == nil {
			t.Skip("a cuBLAS library is installed on this machine")
		}
		if !strings.Contains(err.Error(), "libc.so.6 (loaded, but has no cublasCreate_v2)") {
			t.Fatalf("error does not say libc.so.6 lacks cuBLAS: %v", err)
		}
	})
}

// TestDriverStubBindsAndFailsCleanly: every driver entry point resolves in
// the stub, and Open then fails with ErrNoDevice naming the library and the
// CUresult, without a crash.
func TestDriverStubBindsAndFailsCleanly(t *testing.T) {
	stub := filepath.Join(stubDir(t), "libcuda.so")
	if _, err := os.Stat("/dev/nvidiactl"); err == nil {
		t.Skip("an NVIDIA driver is present: libcuda.so.1 would be found before the stub")
	}
	t.Setenv(EnvLibCUDA, stub)
	b, err := Open(Options{})
	if err == nil {
		b.Close()
		t.Fatal("Open succeeded on the stub library")
	}
	if !errors.Is(err, ErrNoDevice) {
		t.Fatalf("Open on the stub: %v, want an ErrNoDevice", err)
	}
	var re *ResultError
	if !errors.As(err, &re) || re.Code != cudaErrorStub || re.Name != "CUDA_ERROR_STUB_LIBRARY" {
		t.Fatalf("Open on the stub: %v, want cuInit's CUDA_ERROR_STUB_LIBRARY (%d)", err, cudaErrorStub)
	}
	if !strings.Contains(err.Error(), stub) {
		t.Fatalf("error %q does not name the library loaded (%s)", err, stub)
	}
	t.Logf("Open on the stub: %v", err)
}

// TestCUBLASStubBinds: every cuBLAS entry point resolves in the stub, found
// through $SLUICE_CUBLAS.
func TestCUBLASStubBinds(t *testing.T) {
	stub := filepath.Join(stubDir(t), "libcublas.so")
	t.Setenv(EnvCUBLAS, stub)
	lib, err := loadCUBLAS()
	if err != nil {
		t.Fatalf("load cuBLAS stub: %v", err)
	}
	if lib.path != stub {
		t.Fatalf("loaded %s, want the stub %s", lib.path, stub)
	}
}
