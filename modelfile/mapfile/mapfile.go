// Package mapfile memory-maps model files read-only, so that weights are
// read straight from the page cache and never copied onto the heap: the
// one place the GGUF, safetensors and llama2.c readers open their files.
package mapfile

import (
	"fmt"
	"math"
	"os"
	"syscall"
)

// Map memory-maps the whole file at path read-only (shared, so pages are
// the page cache's own). Files shorter than minBytes are refused before
// mapping, as are files larger than the address space. Unmap releases the
// mapping.
func Map(path string, minBytes int64) ([]byte, error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	defer fd.Close()
	st, err := fd.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat %s: %w", path, err)
	}
	size := st.Size()
	if size < max(minBytes, 1) {
		return nil, fmt.Errorf("%s: file is %d bytes, shorter than the %d-byte minimum", path, size, max(minBytes, 1))
	}
	if size > math.MaxInt {
		return nil, fmt.Errorf("%s: file too large to map (%d bytes)", path, size)
	}
	data, err := syscall.Mmap(int(fd.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap %s: %w", path, err)
	}
	return data, nil
}

// Unmap releases a mapping made by Map. data must not be used afterwards.
func Unmap(data []byte) error {
	if err := syscall.Munmap(data); err != nil {
		return fmt.Errorf("munmap: %w", err)
	}
	return nil
}
