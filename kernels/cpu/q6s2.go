package cpu

// q6kRows1 sets out[i] = the Q8_K activation row (q, d, bs) times Q6_K
// weight row i of w (len(out) rows of nb blocks). The rows are cut into
// two contiguous halves streamed side by side, one row of each per pass
// (q6s2_amd64.s: one core keeps two memory streams in flight); an odd last
// row runs through the one-row loop. With vnni both loops are their AVX-512
// VNNI forms (dotQ6KRows2SVNNI, dotQ6KRowsVNNI: q6vrows_amd64.s). Every
// result equals dotQ6KRowsRegAVX2's bit for bit. Needs AVX2 (and AVX-512
// VNNI where vnni is set); no rows do nothing.
func q6kRows1(vnni bool, w []byte, q []int8, d []float32, bs []int16, nb int, out []float32) {
	rows := len(out)
	if rows == 0 || nb == 0 {
		return
	}
	rb := nb * 210
	_, _, _, _ = w[rows*rb-1], q[nb*256-1], d[nb-1], bs[nb*16-1]
	if vnni {
		if h := rows / 2; h > 0 {
			dotQ6KRows2SVNNI(&w[0], &q[0], &d[0], &bs[0], nb, h, &out[0])
		}
		if rows&1 != 0 {
			dotQ6KRowsVNNI(&w[(rows-1)*rb], &q[0], &d[0], &bs[0], nb, 1, &out[rows-1])
		}
		return
	}
	if h := rows / 2; h > 0 {
		dotQ6KRows2SAVX2(&w[0], &q[0], &d[0], &bs[0], nb, h, &out[0])
	}
	if rows&1 != 0 {
		dotQ6KRowsRegAVX2(&w[(rows-1)*rb], &q[0], &d[0], &bs[0], nb, 1, &out[rows-1])
	}
}
