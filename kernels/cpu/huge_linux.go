package cpu

import (
	"bytes"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugePage is the transparent huge page size the arena aligns to (x86-64
// and arm64 with 4 KiB base pages).
const hugePage = 2 << 20

// hugeChunk is the least an arena maps at a time: the weight copies of a
// model share mappings, so that a small matrix does not take a 2 MiB page
// of its own.
const hugeChunk = 64 << 20

// hugeArena hands out the backend's load-time weight copies (the repacked
// Q4_K blocks) from anonymous mappings aligned to 2 MiB and advised
// MADV_HUGEPAGE, so that the decode loops' streams through the weights
// take one TLB entry per 2 MiB instead of per 4 KiB. The Go heap does not
// ask for huge pages, and this kernel's transparent huge pages are
// "madvise" only. The mappings live until free (Backend.Close).
type hugeArena struct {
	off  bool     // huge pages unavailable: alloc returns nil
	init bool     // off has been decided
	maps [][]byte // every mapping, for free
	tail []byte   // the unused end of the last mapping
	used int      // bytes handed out
	ram  int      // the machine's physical memory (0: unknown)
}

// spare reports whether n more bytes of optional copies (copyHuge: weights
// that could stay in the page cache) keep the arena within half the
// machine's memory. A copy is anonymous memory the kernel cannot drop
// under pressure, where file pages can be evicted and read again: a model
// that is most of the machine (an 8B F16 file on 23 GiB) keeps reading
// its file, as before the arena.
func (a *hugeArena) spare(n int) bool {
	if a.ram == 0 {
		var si unix.Sysinfo_t
		if unix.Sysinfo(&si) == nil {
			a.ram = int(uint64(si.Totalram) * uint64(si.Unit))
		}
	}
	return a.ram > 0 && a.used+n <= a.ram/2
}

// alloc returns n zeroed bytes from a huge-page mapping, or nil where the
// kernel has no transparent huge pages ("never", not built in) or the
// mapping fails (the caller then allocates as before).
func (a *hugeArena) alloc(n int) []byte {
	if !a.init {
		a.init = true
		s, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
		a.off = err != nil || bytes.Contains(s, []byte("[never]"))
	}
	if a.off || n <= 0 {
		return nil
	}
	const align = 4096
	if len(a.tail) < n {
		size := (max(n, hugeChunk) + hugePage - 1) &^ (hugePage - 1)
		m, err := mapHuge(size)
		if err != nil {
			return nil
		}
		a.maps = append(a.maps, m)
		a.tail = m
	}
	b := a.tail[:n:n]
	a.used += n
	skip := min(len(a.tail), (n+align-1)&^(align-1))
	a.tail = a.tail[skip:]
	return b
}

// mapHuge maps size bytes (a multiple of hugePage) of anonymous memory at
// a 2 MiB boundary (mapping a page more and unmapping the ends) and
// advises MADV_HUGEPAGE.
func mapHuge(size int) ([]byte, error) {
	p, err := unix.MmapPtr(-1, 0, nil, uintptr(size+hugePage), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, err
	}
	head := -uintptr(p) & (hugePage - 1)
	if head > 0 {
		_ = unix.MunmapPtr(p, head)
	}
	start := unsafe.Add(p, head)
	if tail := hugePage - head; tail > 0 {
		_ = unix.MunmapPtr(unsafe.Add(start, size), tail)
	}
	b := unsafe.Slice((*byte)(start), size)
	if err := unix.Madvise(b, unix.MADV_HUGEPAGE); err != nil {
		_ = unix.MunmapPtr(start, uintptr(size))
		return nil, err
	}
	return b, nil
}

// free unmaps every mapping: the copies handed out must no longer be read.
func (a *hugeArena) free() {
	for _, m := range a.maps {
		_ = unix.MunmapPtr(unsafe.Pointer(&m[0]), uintptr(len(m)))
	}
	a.maps, a.tail, a.used = nil, nil, 0
}

// uintptrOf returns the address of b's first byte.
func uintptrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(&b[0])) }
