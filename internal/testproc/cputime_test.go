package testproc

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	const tail = " S 1 2 3 4 5 6 7 8 9 10 250 120 0 0 20 0 1 0 100 0 0"
	for _, tc := range []struct {
		name, stat string
		want       time.Duration
		err        string
	}{
		{"plain", "42 (api-frontend)" + tail, 3700 * time.Millisecond, ""},
		{"spaces and parens in the name", "42 (a) b (c))" + tail, 3700 * time.Millisecond, ""},
		{"zero", "1 (init) S 0 1 1 0 -1 4194560 1 2 3 4 0 0 0 0 20 0 1 0 5 0 0", 0, ""},
		{"no name", "42 S 1 2", 0, "no ')'"},
		{"short", "42 (x) S 1 2 3", 0, "fields after"},
		{"not a number", "42 (x) S 1 2 3 4 5 6 7 8 9 10 ab 120 0", 0, "not a tick count"},
		{"negative", "42 (x) S 1 2 3 4 5 6 7 8 9 10 -5 120 0", 0, "not a tick count"},
		{"overflow", "42 (x) S 1 2 3 4 5 6 7 8 9 10 9223372036854775807 1 0", 0, "out of range"},
		{"overflow as a Duration", "42 (x) S 1 2 3 4 5 6 7 8 9 10 922337203685 1 0", 0, "out of range"},
		{"largest", "42 (x) S 1 2 3 4 5 6 7 8 9 10 922337203684 1 0", 922337203685 * 10 * time.Millisecond, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseStatCPU(tc.stat)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %s, %v; want %s", got, err, tc.want)
			}
		})
	}
}

// TestCPUTimeGrows: this process's CPU time rises by about the CPU work it
// does (at least, since other goroutines may run too).
func TestCPUTimeGrows(t *testing.T) {
	before, err := CPUTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	x := uint64(1)
	for start := time.Now(); ; {
		for range 100000 {
			x = x*6364136223846793005 + 1
		}
		if after, err := CPUTime(os.Getpid()); err != nil {
			t.Fatal(err)
		} else if after-before >= 50*time.Millisecond {
			break
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("CPU time did not reach +50 ms in 30 s of spinning (x %d)", x)
		}
	}
	if _, err := CPUTime(1 << 30); err == nil {
		t.Error("CPUTime of a pid that does not exist: no error")
	}
}

func FuzzParseStatCPU(f *testing.F) {
	f.Add("42 (api-frontend) S 1 2 3 4 5 6 7 8 9 10 250 120 0 0 20 0 1 0 100 0 0")
	f.Add("42 (a) b (c)) S 1 2 3 4 5 6 7 8 9 10 1 2 3")
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseStatCPU(s)
		if err == nil && d < 0 {
			t.Fatalf("negative CPU time %s from %q", d, s)
		}
	})
}
