package sample

import (
	"math"

	"github.com/sluice-llm/sluice/ipc"
)

// draw samples from row (processed logits) with temperature, min_p, top_k
// and top_p, using u in [0, 1).
//
// One vectorised pass computes every candidate's unnormalised probability
// e_i = exp((v_i - max)/T) (0 for min_p misses, -inf and NaN) and their
// sum. Plain temperature then draws directly, in id order, from per-chunk
// sums. Top-k and top-p need the threshold t at which the kept set ends:
// the set is {e_i > t} plus the first r ids with e_i == t (ties go to the
// lowest ids, as a stable sort by probability would give). t is found
// without sorting the vocabulary: a strided sample suggests two thresholds
// around it, one vectorised pass counts and sums the elements above each
// (widening until they bracket t), a histogram by value splits the few
// hundred elements between the two, and only the histogram bucket where
// the set ends is selected exactly. The draw then goes straight to the
// chunk holding its target (per-chunk masses come from those passes) and
// scans that chunk alone. With top-k and top-p together, the top k are
// gathered and top-p is applied to them by selection.
func (s *worker) draw(row []float32, p *ipc.SamplingParams, u float64) int32 {
	invT := 1 / p.Temperature
	lo := float32(expLo)
	if p.MinP > 0 {
		// p_i >= min_p * p_max  <=>  (v_i - max)/T >= ln(min_p)
		lo = max(lo, float32(math.Log(float64(p.MinP))))
	}
	k := max(int(p.TopK), 0)
	tp := float64(p.TopP)
	if tp <= 0 || tp >= 1 {
		tp = 0
	}
	e := s.e[:len(row)]
	m, z, npos := s.expRow(e, row, invT, lo)
	if m == negInf || m == posInf || npos == 0 {
		return argmax(row)
	}
	if k >= npos {
		k = 0
	}
	switch {
	case k == 0 && tp == 0:
		return s.drawChunks(e, u*z)
	case k == 0:
		need := tp * z
		if need <= 1 {
			// The top token (e == 1) alone reaches top_p.
			return int32(max(indexOf(e, 1), 0))
		}
		t, _, mass := s.threshold(e, true, need, z, npos)
		return s.drawAbove(e, t, u*mass)
	}
	t, r, mass := s.threshold(e, false, float64(k), z, npos)
	if tp == 0 {
		return s.drawAbove(e, t, u*mass)
	}
	// Top-p over the top k: gather them (about k) and select exactly.
	idx, val := s.idx, s.val
	n := compress(e, 0, t, posInf, idx, val)
	kept := 0
	for i := range n {
		if val[i] == t {
			if r == 0 {
				continue
			}
			r--
		}
		idx[kept], val[kept] = idx[i], val[i]
		kept++
	}
	kept = nucleus(idx[:kept], val[:kept], tp*sum(val[:kept]))
	return pick(idx[:kept], val[:kept], u)
}

var posInf = float32(math.Inf(1))

// expRow fills e with the unnormalised probabilities of row,
// exp((v-m)/T) with m the row's maximum (NaNs ignored), and s.chunkSum
// with their per-chunk sums; it returns m, the total and the number of
// non-zero entries (nothing else when m is infinite).
//
// (A single pass taking each chunk's maximum in L1 and recomputing the
// chunks done before the maximum last rose measured no faster: half the
// chunks are recomputed on average, which costs what the separate
// maximum pass does.)
func (s *worker) expRow(e, row []float32, invT, lo float32) (m float32, z float64, npos int) {
	m = rowMax(row)
	if m == negInf || m == posInf {
		return m, 0, 0
	}
	nch := (len(row) + chunk - 1) / chunk
	for c := range nch {
		a, b := c*chunk, min((c+1)*chunk, len(row))
		cz, cc := expChunk(e[a:b], row[a:b], m, invT, lo, &s.ln32)
		s.chunkSum[c] = cz
		z += cz
		npos += cc
	}
	return m, z, npos
}

// drawChunks returns the id at which the running sum of e, in id order,
// first exceeds target, using the chunk sums of expRow to skip ahead.
func (s *worker) drawChunks(e []float32, target float64) int32 {
	nch := (len(e) + chunk - 1) / chunk
	for c := range nch {
		cs := s.chunkSum[c]
		if target >= cs {
			target -= cs
			continue
		}
		a, b := c*chunk, min((c+1)*chunk, len(e))
		var acc float64
		last := -1
		for i := a; i < b; i++ {
			if x := e[i]; x != 0 {
				acc += float64(x)
				last = i
				if acc > target {
					return int32(i)
				}
			}
		}
		if last >= 0 { // rounding: the chunk's last candidate
			return int32(last)
		}
	}
	return lastNonZero(e)
}

// lastNonZero returns the highest id with e > 0 (0 when none).
func lastNonZero(e []float32) int32 {
	for i := len(e) - 1; i >= 0; i-- {
		if e[i] != 0 {
			return int32(i)
		}
	}
	return 0
}

// drawAbove returns the member of the set left by threshold ({e_i > t}
// plus the first r ids with e_i == t) at which the running mass of the
// set, in id order, first exceeds target (u times the set's mass). The
// per-chunk masses threshold stored let it go straight to the chunk
// holding the target and scan only that one.
func (s *worker) drawAbove(e []float32, t float32, target float64) int32 {
	nch := (len(e) + chunk - 1) / chunk
	lastChunk := -1
	for c := range nch {
		cs := s.chunkSum[c]
		if cs == 0 {
			continue
		}
		lastChunk = c
		if target >= cs {
			target -= cs
			continue
		}
		return s.scanChunk(e, c, t, target)
	}
	if lastChunk < 0 {
		return int32(max(indexOf(e, t), 0))
	}
	// Rounding left target at or past the total: the last member.
	return s.scanChunk(e, lastChunk, t, math.Inf(1))
}

// scanChunk returns the member of chunk c at which the running mass first
// exceeds target, or the chunk's last member.
func (s *worker) scanChunk(e []float32, c int, t float32, target float64) int32 {
	a, b := c*chunk, min((c+1)*chunk, len(e))
	ties := s.chunkTies[c]
	var acc float64
	last := int32(a)
	for i := a; i < b; i++ {
		x := e[i]
		if x < t || x == 0 {
			continue
		}
		if x == t {
			if ties == 0 {
				continue
			}
			ties--
		}
		acc += float64(x)
		if acc > target {
			return int32(i)
		}
		last = int32(i)
	}
	return last
}

// Threshold search tuning: the sample size, the band of candidates left
// to selectBand, and the most bracketing passes before selecting whatever
// band is left (always correct, slower for a wide band).
const (
	sampleSize = 256
	bandMax    = 1024
	maxPasses  = 8
)

// bound is one evaluated threshold: the sum and count of the elements at
// or above it.
type bound struct {
	t float32
	s float64
	c int
}

// threshold finds t and r such that the set {e_i > t} plus the first r
// ids with e_i == t is the smallest top set (by e, ties to the lowest ids)
// whose mass (byMass) or size (else) reaches need, and returns the set's
// mass. It leaves in s.chunkSum and s.chunkTies the set's mass in each
// chunk and the ties still to take at each chunk's start, for drawAbove.
// z and npos are the total mass and number of non-zero entries; need must
// not exceed what the non-zero entries hold.
//
// Invariant: the elements >= lo.t reach need, those >= hi.t do not; the
// exact selection runs on the band [lo.t, hi.t). s.hiChunk holds the
// per-chunk mass of the elements >= hi.t.
func (s *worker) threshold(e []float32, byMass bool, need, z float64, npos int) (t float32, r int, mass float64) {
	V := len(e)
	nch := (V + chunk - 1) / chunk
	lo := bound{math.SmallestNonzeroFloat32, z, npos}
	hi := bound{math.Nextafter32(1, 2), 0, 0}
	hiChunk := s.hiChunk[:nch]
	clear(hiChunk)
	// A strided sample, sorted ascending, estimates where t lies: by mass,
	// the elements below t hold z-need (the tail is many small values,
	// which a sample estimates well; the top few are often missed); by
	// count, need elements lie above t.
	ns := min(sampleSize, V)
	stride := V / ns
	q := s.sample[:ns]
	for j := range q {
		q[j] = e[j*stride]
	}
	sortCoarse(q, &s.keys)
	scale := float64(V) / float64(ns)
	js := ns
	if byMass {
		tail, acc := z-need, 0.0
		for j, v := range q {
			acc += float64(v) * scale
			if acc >= tail {
				js = j
				break
			}
		}
	} else {
		js = ns - int(math.Ceil(need/scale))
	}
	// Each pass evaluates two sampled values as thresholds. Until both
	// ends of the bracket are known, they sit around the estimate, twice
	// as far apart each time (galloping); then they trisect the sampled
	// values left inside the bracket.
	w, loSet, hiSet := 2, false, false
	for pass := 0; pass < maxPasses && lo.c-hi.c > bandMax; pass++ {
		ia := 0
		for ia < ns && q[ia] <= lo.t {
			ia++
		}
		ib := ia
		for ib < ns && q[ib] < hi.t {
			ib++
		}
		if ib <= ia {
			break // no sampled value inside the bracket
		}
		var i1, i2 int
		if loSet && hiSet {
			i1, i2 = ia+(ib-ia)/3, ia+2*(ib-ia)/3
		} else {
			c := min(max(js, ia), ib-1)
			i1, i2 = max(c-w, ia), min(c+w, ib-1)
			w *= 2
		}
		t1, t2 := q[i1], q[i2]
		var x [2]bound
		x[0].t, x[1].t = t1, t2
		for c := range nch {
			a, b := c*chunk, min((c+1)*chunk, V)
			s1, c1, s2, c2 := massCount2(e[a:b], t1, t2, &s.mc)
			s.passChunk[0][c], s.passChunk[1][c] = s1, s2
			x[0].s += s1
			x[0].c += c1
			x[1].s += s2
			x[1].c += c2
		}
		for j, b := range x {
			ok := b.s >= need
			if !byMass {
				ok = float64(b.c) >= need
			}
			if ok && b.t > lo.t {
				lo, loSet = b, true
			} else if !ok && b.t < hi.t {
				hi, hiSet = b, true
				copy(hiChunk, s.passChunk[j][:nch])
			}
		}
	}
	// Select in the band: its ids (in id order) and values, then a
	// histogram by value narrows the exact selection to one bucket.
	idx, val := s.idx, s.val
	n := bandIDs(e, lo.t, hi.t, idx)
	if n == 0 { // cannot happen while the invariant holds
		hi = bound{posInf, 0, 0}
		clear(hiChunk)
		n = bandIDs(e, lo.t, posInf, idx)
	}
	for i, id := range idx[:n] {
		val[i] = e[id]
	}
	t, r = s.selectBand(idx[:n], val[:n], lo.t, hi.t, byMass, need-hi.s, float64(int(need)-hi.c))
	// The set's mass per chunk: hiChunk plus its band members, whose ties
	// go to the lowest ids.
	copy(s.chunkSum[:nch], hiChunk)
	mass = hi.s
	ties, cur := r, 0
	s.chunkTies[0] = int32(ties)
	for i, v := range val[:n] {
		c := int(idx[i]) / chunk
		for cur < c {
			cur++
			s.chunkTies[cur] = int32(ties)
		}
		if v == t {
			if ties == 0 {
				continue
			}
			ties--
		} else if v < t {
			continue
		}
		s.chunkSum[c] += float64(v)
		mass += float64(v)
	}
	for cur < nch-1 {
		cur++
		s.chunkTies[cur] = int32(ties)
	}
	return t, r, mass
}

// bandBuckets is the number of value buckets selectBand sorts a band into.
const bandBuckets = 64

// selectBand returns t and r such that the band's values > t plus its
// first r values == t (by id; idx and val are in id order) are the
// smallest top set of the band whose mass reaches needMass (byMass) or
// whose size reaches needCount; the band's values lie in [lo, hi). A
// histogram by value (linear buckets, which keep value order) finds the
// bucket where the set ends; only that bucket's members are selected
// exactly, so nothing depends on a comparison sort's branches.
func (s *worker) selectBand(idx []int32, val []float32, lo, hi float32, byMass bool, needMass, needCount float64) (float32, int) {
	var mass [bandBuckets]float64
	var cnt [bandBuckets]int
	scale := float32(bandBuckets) / (hi - lo)
	if hi == posInf { // only after a failed invariant: one bucket
		scale = 0
	}
	bucket := func(v float32) int { return min(int((v-lo)*scale), bandBuckets-1) }
	for _, v := range val {
		b := bucket(v)
		mass[b] += float64(v)
		cnt[b]++
	}
	need := needCount
	if byMass {
		need = needMass
	}
	top, acc := -1, 0.0
	for b := bandBuckets - 1; b >= 0; b-- {
		x := float64(cnt[b])
		if byMass {
			x = mass[b]
		}
		if acc+x >= need {
			top = b
			break
		}
		acc += x
	}
	if top < 0 { // rounding: the band does not reach need; take it all
		return minTies(val, len(val))
	}
	// The boundary bucket's members (branch-free gather), then exact.
	bi, bv := s.bidx, s.bval
	m := 0
	for i, v := range val {
		bi[m], bv[m] = idx[i], v
		m += b2i(bucket(v) == top)
	}
	var k int
	if byMass {
		k = nucleus(bi[:m], bv[:m], need-acc)
	} else {
		k = max(min(int(need-acc), m), 1)
		if k < m {
			selectTop(bi[:m], bv[:m], k)
		}
	}
	if m == 0 { // cannot happen: the boundary bucket is not empty
		return minTies(val, len(val))
	}
	return minTies(bv, k)
}

// minTies returns the least of v[:k] and how many of v[:k] equal it.
func minTies(v []float32, k int) (float32, int) {
	t := v[0]
	for _, x := range v[:k] {
		t = min(t, x)
	}
	r := 0
	for _, x := range v[:k] {
		r += b2i(x == t)
	}
	return t, r
}

// sortCoarse sorts q (values in [0, 1]) ascending after rounding each
// down to its top 16 bits (8 bits of mantissa: within 0.4%, fine for
// thresholds that only need to bracket). Two counting passes over 8-bit
// digits; no data-dependent branches, unlike a comparison sort, whose
// mispredictions cost several microseconds on fresh data.
func sortCoarse(q []float32, k *[2][sampleSize]uint16) {
	a, b := k[0][:len(q)], k[1][:len(q)]
	for i, v := range q {
		a[i] = uint16(math.Float32bits(v) >> 16)
	}
	for shift := 0; shift < 16; shift += 8 {
		var pos [256]int
		for _, x := range a {
			pos[x>>shift&0xff]++
		}
		sum := 0
		for d, c := range pos {
			pos[d] = sum
			sum += c
		}
		for _, x := range a {
			d := x >> shift & 0xff
			b[pos[d]] = x
			pos[d]++
		}
		a, b = b, a
	}
	for i, x := range a {
		q[i] = math.Float32frombits(uint32(x) << 16)
	}
}

// b2i is 1 for true; the compiler turns it into a flag set, not a branch.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func sum(v []float32) float64 {
	var z float64
	for _, x := range v {
		z += float64(x)
	}
	return z
}

// pick draws one of idx with probability proportional to val, using u in
// [0, 1).
func pick(idx []int32, val []float32, u float64) int32 {
	target := u * sum(val)
	var acc float64
	for i, x := range val {
		acc += float64(x)
		if acc > target {
			return idx[i]
		}
	}
	return idx[len(idx)-1] // rounding: the last candidate
}

// partition3 reorders [lo, hi) of (idx, val) around pivot into values
// greater than, equal to and less than it, and returns the bounds a, b:
// [lo,a) > pivot, [a,b) == pivot, [b,hi) < pivot.
func partition3(idx []int32, val []float32, lo, hi int, pivot float32) (int, int) {
	a, i, b := lo, lo, hi
	for i < b {
		switch v := val[i]; {
		case v > pivot:
			val[a], val[i] = val[i], val[a]
			idx[a], idx[i] = idx[i], idx[a]
			a++
			i++
		case v < pivot:
			b--
			val[b], val[i] = val[i], val[b]
			idx[b], idx[i] = idx[i], idx[b]
		default:
			i++
		}
	}
	return a, b
}

// pivotOf is the median of the first, middle and last values of [lo, hi).
func pivotOf(val []float32, lo, hi int) float32 {
	x, y, z := val[lo], val[lo+(hi-lo)/2], val[hi-1]
	if x > y {
		x, y = y, x
	}
	if y > z {
		y = z
	}
	if x > y {
		y = x
	}
	return y
}

// selectTop moves the k largest values (with their ids) to the front, in
// no particular order. Expected O(n).
func selectTop(idx []int32, val []float32, k int) {
	lo, hi := 0, len(val)
	for hi-lo > 1 {
		a, b := partition3(idx, val, lo, hi, pivotOf(val, lo, hi))
		switch {
		case k <= a:
			hi = a
		case k <= b:
			return
		default:
			lo = b
		}
	}
}

// nucleus moves the smallest set of largest values whose sum reaches need
// to the front and returns its size (at least 1). Expected O(n).
func nucleus(idx []int32, val []float32, need float64) int {
	lo, hi := 0, len(val)
	for hi-lo > 1 {
		a, b := partition3(idx, val, lo, hi, pivotOf(val, lo, hi))
		var gt float64
		for i := lo; i < a; i++ {
			gt += float64(val[i])
		}
		if gt >= need && a > lo {
			hi = a
			continue
		}
		eq := float64(val[a]) * float64(b-a)
		if gt+eq >= need {
			need -= gt
			end := a
			for end < b && need > 0 {
				need -= float64(val[end])
				end++
			}
			return max(end, 1)
		}
		need -= gt + eq
		lo = b
	}
	return max(hi, 1)
}

// logprobs fills lp for the sampled token tok from the raw row in s.raw,
// with the top k alternatives, appended to ids and lps (empty, with
// capacity for k). The log-sum-exp and the rank use the vectorised
// kernels; the top k are selected from the few values at or above the
// 4th largest of a strided sample. Rows with infinities or a NaN sampled
// token take the plain loop.
func (s *worker) logprobs(tok int32, k int, lp *ipc.TokenLogprobs, ids []int32, lps []float32) {
	raw := s.raw
	m := rowMax(raw)
	tv := raw[tok]
	if m == negInf || m == posInf || tv != tv {
		s.logprobsScalar(tok, k, lp, ids, lps)
		return
	}
	var z float64
	for a := 0; a < len(raw); a += chunk {
		b := min(a+chunk, len(raw))
		cz, _ := expChunk(s.e[a:b], raw[a:b], m, 1, expLo, &s.ln32)
		z += cz
	}
	lse := float64(m) + math.Log(z)
	_, above, _, _ := massCount2(raw, math.Nextafter32(tv, posInf), posInf, &s.mc) // counts only
	lp.Logprob = float32(float64(tv) - lse)
	lp.Rank = int32(above) + 1
	if k > 0 {
		// Candidates: the values at or above the 4th largest sampled one
		// (about 4*stride of them); too few means the plain loop.
		const keep = 4
		ns := min(sampleSize, len(raw))
		stride := len(raw) / ns
		var top [keep]float32
		nt := 0
		for j := range ns {
			v := raw[j*stride]
			if !(v > negInf) || (nt == keep && !(v > top[keep-1])) {
				continue
			}
			i := nt
			if nt < keep {
				nt++
			} else {
				i = keep - 1
			}
			for i > 0 && v > top[i-1] {
				top[i] = top[i-1]
				i--
			}
			top[i] = v
		}
		n := 0
		if nt == keep {
			n = compress(raw, 0, top[keep-1], posInf, s.idx, s.val)
		}
		if n < k {
			s.logprobsScalar(tok, k, lp, ids, lps)
			return
		}
		ids, lps = topK(s.idx[:n], s.val[:n], k, ids, lps)
		for i := range lps {
			lps[i] = float32(float64(lps[i]) - lse)
		}
	}
	lp.TopIDs, lp.TopLogprobs = ids, lps
}

// topK appends to ids and lps (empty, capacity k) the k largest of vals,
// with their ids from cand (or their indexes when cand is nil), in
// descending order; ties keep the earlier candidate first, NaNs are
// skipped.
func topK(cand []int32, vals []float32, k int, ids []int32, lps []float32) ([]int32, []float32) {
	for c, v := range vals {
		if v != v || (len(lps) == k && !(v > lps[k-1])) {
			continue
		}
		j := len(lps)
		if j < k {
			lps = append(lps, 0)
			ids = append(ids, 0)
		} else {
			j = k - 1
		}
		for j > 0 && v > lps[j-1] {
			lps[j], ids[j] = lps[j-1], ids[j-1]
			j--
		}
		id := int32(c)
		if cand != nil {
			id = cand[c]
		}
		lps[j], ids[j] = v, id
	}
	return ids, lps
}

// logprobsScalar is logprobs in one plain loop over the row (any row,
// infinities included).
func (s *worker) logprobsScalar(tok int32, k int, lp *ipc.TokenLogprobs, ids []int32, lps []float32) {
	raw := s.raw
	m := maxOf(raw)
	tv := raw[tok]
	var sum float64
	rank := int32(1)
	for _, v := range raw {
		sum += float64(expNeg(m - v))
		if v > tv {
			rank++
		}
	}
	lse := float64(m) + math.Log(sum)
	lp.Logprob = float32(float64(tv) - lse)
	lp.Rank = rank
	if k > 0 {
		ids, lps = topK(nil, raw, k, ids, lps)
		for i := range lps {
			lps[i] = float32(float64(lps[i]) - lse)
		}
	}
	lp.TopIDs, lp.TopLogprobs = ids, lps
}
