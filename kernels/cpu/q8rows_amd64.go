//go:build amd64 && !purego

package cpu

// dotQ8_0RowsPfAVX2 computes rows consecutive Q8_0 weight rows of nb
// blocks against one Q8 activation row, prefetching the weights 2 KiB
// ahead (q8rows_amd64.s); each result equals dotQ8_0RowsAVX2's bit for
// bit.
//
//go:noescape
func dotQ8_0RowsPfAVX2(w *byte, xq *int8, xd *float32, nb int, rows int, out *float32)

// dotQ4_0RowsPfAVX2 computes rows consecutive Q4_0 weight rows of nb
// blocks against one Q8 activation row, prefetching the weights 2 KiB
// ahead (q8rows_amd64.s); each result equals dotQ4_0AVX2's bit for bit.
//
//go:noescape
func dotQ4_0RowsPfAVX2(w *byte, xq *int8, xd *float32, nb int, rows int, out *float32)

// dotQ4_0RowsQuadAVX2 is dotQ4_0RowsPfAVX2 with four blocks' scales
// converted at once (q8rows_amd64.s); each result equals dotQ4_0AVX2's bit
// for bit.
//
//go:noescape
func dotQ4_0RowsQuadAVX2(w *byte, xq *int8, xd *float32, nb int, rows int, out *float32)
