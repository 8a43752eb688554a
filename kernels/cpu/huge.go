package cpu

import "github.com/sluice-llm/sluice/kernels"

// copyHuge replaces a stored weight that the kernels read in the file's
// layout (Q6_K, Q8_0, F16, …: every type but a repacked Q4_K and F32)
// with a copy in the backend's huge-page arena (huge_linux.go), and
// reports whether it did: the decode loops then stream it through 2 MiB
// pages instead of the page cache's 4 KiB ones. The copy has the same
// bytes (results do not change); the loader releases the file's pages
// (Host.Copied), so that memory holds the weight once. Where no huge
// pages are to be had, or the copies would pass half the machine's memory
// (hugeArena.spare), the weight stays where it is.
func (b *Backend) copyHuge(h *kernels.Host) bool {
	if b.noHuge || h.DT == kernels.F32 || h.Repacked || h.Copied || h.R < 1 {
		return false
	}
	n := h.R * h.DT.RowBytes(h.C)
	if n < copyHugeMin || len(h.Q) < n || !b.huge.spare(n) {
		return false
	}
	q := b.huge.alloc(n)
	if q == nil {
		return false
	}
	b.pool.parallel((n+copyStep-1)/copyStep, 1, 2, &copyTask{dst: q, src: h.Q[:n], prefault: !b.noPrefault})
	h.Q, h.Copied = q, true
	return true
}

// copyHugeMin is the smallest weight copyHuge copies (smaller ones gain
// no TLB reach worth a copy).
const copyHugeMin = 256 << 10

// copyStep is the bytes copyTask maps (prefault) and copies at a time.
const copyStep = 256 << 10

// copyTask copies steps [lo, hi) of copyStep bytes of src into dst on the
// backend's workers, mapping each step's pages first (prefault).
type copyTask struct {
	dst, src []byte
	prefault bool
}

func (t *copyTask) run(lo, hi, _ int) {
	for s := lo; s < hi; s++ {
		d := t.dst[s*copyStep : min(len(t.dst), (s+1)*copyStep)]
		if t.prefault {
			prefault(d)
		}
		copy(d, t.src[s*copyStep:])
	}
}
