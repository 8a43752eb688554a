package memstat

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the testdata goldens")

// render is the golden form of ParseRollup's answer.
func render(r Rollup, err error) string {
	if err != nil {
		return "error: " + err.Error() + "\n"
	}
	return fmt.Sprintf("rss %d\nanonymous %d\nfile %d\n", r.Rss, r.Anonymous, r.File)
}

// TestParseRollup parses each testdata/*.txt and compares with its
// .golden: a real smaps_rollup, and malformed ones that must be refused.
func TestParseRollup(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			in, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			got := render(ParseRollup(bytes.NewReader(in)))
			golden := strings.TrimSuffix(f, ".txt") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("got\n%s\nwant\n%s", got, want)
			}
		})
	}
}

// TestLive reads this process's figures around a 64 MiB slice that is
// written: the anonymous resident memory and the Go heap objects both
// grow by about its size.
func TestLive(t *testing.T) {
	if _, err := os.Stat("/proc/self/smaps_rollup"); err != nil {
		t.Skipf("no /proc/self/smaps_rollup: %v", err)
	}
	runtime.GC()
	r0, err := ReadRollup()
	if err != nil {
		t.Fatal(err)
	}
	g0 := ReadGo()
	const size = 64 << 20
	buf := make([]byte, size)
	for i := range buf {
		buf[i] = byte(i)
	}
	r1, err := ReadRollup()
	if err != nil {
		t.Fatal(err)
	}
	g1 := ReadGo()
	if d := r1.Anonymous - r0.Anonymous; d < size*9/10 {
		t.Errorf("anonymous RSS grew %d bytes for a %d-byte slice (%+v → %+v)", d, size, r0, r1)
	}
	if d := g1.HeapObjects - g0.HeapObjects; d < size {
		t.Errorf("Go heap objects grew %d bytes for a %d-byte slice", d, size)
	}
	if g1.Total < g1.HeapObjects+g1.Stacks || g1.Stacks <= 0 || g1.Runtime <= 0 {
		t.Errorf("Go memory classes inconsistent: %+v", g1)
	}
	if r1.File <= 0 || r1.Rss != r1.Anonymous+r1.File {
		t.Errorf("rollup %+v: want file-backed pages (the executable) and Rss = Anonymous + File", r1)
	}
	runtime.KeepAlive(buf)
}

// FuzzParseRollup checks that ParseRollup never panics and that what it
// accepts is consistent.
func FuzzParseRollup(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.txt")
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseRollup(bytes.NewReader(b))
		if err != nil {
			return
		}
		if r.Rss < 0 || r.Anonymous < 0 || r.File != r.Rss-r.Anonymous {
			t.Fatalf("accepted inconsistent %+v", r)
		}
	})
}
