//go:build amd64 && !purego

package cpu

// dotQ6KRowsRegAVX2 computes rows consecutive Q6_K weight rows of nb blocks
// against one Q8_K activation row with the sub-block scales kept in
// registers (q6rows_amd64.s); each result equals dotQ6KRowsAVX2's bit for
// bit.
//
//go:noescape
func dotQ6KRowsRegAVX2(w *byte, xq *int8, xd *float32, bs *int16, nb int, rows int, out *float32)

// dotQ5KRowsPfAVX2 is dotQ5KRowsAVX2 prefetching its weights q6Ahead
// (2048) bytes ahead instead of rowAhead (q6rows_amd64.s); its results
// equal dotQ5KRowsAVX2's bit for bit.
//
//go:noescape
func dotQ5KRowsPfAVX2(w *byte, xq *int8, xd *float32, bs *int16, nb int, rows int, out *float32)
