package cpu

// q8_0Rows1 sets out[i] = the Q8 activation (xq, xd) · Q8_0 row i of w
// (len(out) rows of nb blocks; no rows or nb = 0 do nothing), AVX2 only.
// The rows are cut into three contiguous thirds streamed side by side,
// three rows per pass (q8s3_amd64.s: one core keeps three memory streams
// in flight); the rows left over run through the one-row loop
// dotQ8_0RowsPfAVX2. Every result equals the one-row loop's bit for bit.
func q8_0Rows1(w []byte, xq []int8, xd []float32, nb int, out []float32) {
	rows := len(out)
	if rows == 0 || nb == 0 {
		return
	}
	rb := 34 * nb
	_, _, _ = w[rows*rb-1], xq[nb*32-1], xd[nb-1]
	h := rows / 3
	if h > 0 {
		dotQ8_0Rows3AVX2(&w[0], &xq[0], &xd[0], nb, h, &out[0])
	}
	if r := rows - 3*h; r > 0 {
		dotQ8_0RowsPfAVX2(&w[3*h*rb], &xq[0], &xd[0], nb, r, &out[3*h])
	}
}
