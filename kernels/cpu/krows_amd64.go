//go:build amd64 && !purego

package cpu

// dotQ4KRows2AVX2 computes rows (even) consecutive Q4_K weight rows of nb
// blocks against one Q8_K activation row, two rows per pass
// (krows_amd64.s); each result equals dotQ4KRowsAVX2's bit for bit. rows1
// serves the two-stream loop of ks2_amd64.s instead; this one stays as the
// tests' and benchmarks' reference.
//
//go:noescape
func dotQ4KRows2AVX2(w *byte, xq *int8, xd *float32, bs *int16, nb int, rows int, out *float32)
