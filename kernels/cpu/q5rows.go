package cpu

// q5kRows1 sets out[i] = the Q8_K activation row (q, d, bs) times Q5_K
// weight row i of w (len(out) rows of nb blocks). Without vnni it is
// dotQ5KRowsPfAVX2 (q6rows_amd64.s); with vnni the rows are cut into two
// contiguous halves streamed side by side, one row of each per pass
// (dotQ5KRows2SVNNI, q5rows_amd64.s), and an odd last row runs through
// dotQ5KRowsVNNI. Every result equals dotQ5KRowsAVX2's bit for bit. Needs
// AVX2 (and AVX-512 VNNI where vnni is set); no rows do nothing.
func q5kRows1(vnni bool, w []byte, q []int8, d []float32, bs []int16, nb int, out []float32) {
	rows := len(out)
	if rows == 0 || nb == 0 {
		return
	}
	rb := nb * 176
	_, _, _, _ = w[rows*rb-1], q[nb*256-1], d[nb-1], bs[nb*16-1]
	if !vnni {
		dotQ5KRowsPfAVX2(&w[0], &q[0], &d[0], &bs[0], nb, rows, &out[0])
		return
	}
	if h := rows / 2; h > 0 {
		dotQ5KRows2SVNNI(&w[0], &q[0], &d[0], &bs[0], nb, h, &out[0])
	}
	if rows&1 != 0 {
		dotQ5KRowsVNNI(&w[(rows-1)*rb], &q[0], &d[0], &bs[0], nb, 1, &out[rows-1])
	}
}
