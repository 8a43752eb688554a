package frontend

import (
	"runtime"
	"testing"
)

// TestProcsController: --procs auto sizes GOMAXPROCS (one P narrow, every
// core wide) unless the environment sets GOMAXPROCS or there is one core;
// --procs all leaves it alone.
func TestProcsController(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	tests := []struct {
		name   string
		mode   string
		envSet bool
		cores  int
		want   bool // a controller
	}{
		{"auto", "auto", false, 2, true},
		{"auto many cores", "auto", false, 64, true},
		{"empty is auto", "", false, 2, true},
		{"all", "all", false, 2, false},
		{"GOMAXPROCS set", "auto", true, 2, false},
		{"one core", "auto", false, 1, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pc := procsController(tc.mode, tc.envSet, tc.cores)
			defer pc.Close()
			if (pc != nil) != tc.want {
				t.Fatalf("controller %v, want %v", pc != nil, tc.want)
			}
			if pc != nil {
				if p := pc.Policy(); p.Narrow != 1 || p.Wide != tc.cores {
					t.Fatalf("policy %+v, want narrow 1, wide %d", p, tc.cores)
				}
			}
		})
	}
}
