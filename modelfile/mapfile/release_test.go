package mapfile

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// mappingRSS returns the resident kilobytes of the mapping holding p, from
// /proc/self/smaps.
func mappingRSS(t *testing.T, p uintptr) int {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("SKIP: no /proc/self/smaps (%v): resident pages cannot be read here", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	in := false
	for sc.Scan() {
		ln := sc.Text()
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(ln, "%x-%x ", &lo, &hi); n == 2 && strings.Contains(ln, " ") {
			in = lo <= p && p < hi
			continue
		}
		if in && strings.HasPrefix(ln, "Rss:") {
			kb, err := strconv.Atoi(strings.Fields(ln)[1])
			if err != nil {
				t.Fatal(err)
			}
			return kb
		}
	}
	t.Fatalf("no mapping holds %#x in /proc/self/smaps", p)
	return 0
}

// TestRelease maps a 4 MiB file, reads every page, releases all but the
// first and last page and checks that the mapping's resident size drops to
// at most those two pages while the bytes still read back unchanged.
func TestRelease(t *testing.T) {
	const size = 4 << 20
	want := bytes.Repeat([]byte("sluice-mapfile-"), size/15+1)[:size]
	path := filepath.Join(t.TempDir(), "f.bin")
	if err := os.WriteFile(path, want, 0o600); err != nil {
		t.Fatal(err)
	}
	data, err := Map(path, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer Unmap(data)
	p := uintptr(unsafe.Pointer(&data[0]))
	if !bytes.Equal(data, want) {
		t.Fatal("mapped bytes differ from the file")
	}
	if kb := mappingRSS(t, p); kb < size/1024/2 {
		t.Fatalf("resident %d KiB after reading %d KiB", kb, size/1024)
	}
	if err := Release(data[1 : size-1]); err != nil {
		t.Fatal(err)
	}
	ps := os.Getpagesize()
	if kb := mappingRSS(t, p); kb > 2*ps/1024 {
		t.Errorf("resident %d KiB after Release, want at most the 2 partial pages (%d KiB)", kb, 2*ps/1024)
	}
	if !bytes.Equal(data, want) {
		t.Error("bytes read after Release differ from the file")
	}
	if err := Release(nil); err != nil {
		t.Errorf("Release(nil) = %v", err)
	}
	if err := Release(data[10:20]); err != nil { // inside one page: nothing to drop
		t.Errorf("Release of a partial page = %v", err)
	}
}
