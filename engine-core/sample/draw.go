package sample

import (
	"math"

	"github.com/sluice-llm/sluice/ipc"
)

// numBuckets splits candidates by how far their scaled logit lies below
// the top one, in quarter-nat steps; the last bucket marks excluded ones.
const (
	numBuckets   = 256
	bucketScale  = 4
	excluded     = numBuckets - 1
	lastBucket   = numBuckets - 2
	bucketsLimit = float32(lastBucket) / bucketScale
)

// draw samples from row (processed logits) with temperature, min_p, top_k
// and top_p, using u in [0, 1).
//
// One pass computes every candidate's unnormalised probability and sorts
// it into a bucket by distance from the top logit (quarter-nat buckets: a
// histogram of counts and mass). The histogram locates the bucket holding
// the top-k / top-p boundary: buckets above it are kept whole, and only the
// boundary bucket's members are selected exactly; nothing is sorted.
func (s *worker) draw(row []float32, p *ipc.SamplingParams, u float64) int32 {
	m := maxOf(row)
	if m == negInf || m != m {
		return argmax(row)
	}
	invT := 1 / p.Temperature
	top := m * invT
	limit := float32(math.Inf(1))
	if p.MinP > 0 {
		// p_i >= min_p * p_max  <=>  top - v_i/T <= -ln(min_p)
		limit = -float32(math.Log(float64(p.MinP)))
	}
	k := int(p.TopK)
	tp := float64(p.TopP)
	if tp <= 0 || tp >= 1 {
		tp = 0
	}
	e, bkt := s.e[:len(row)], s.bkt[:len(row)]
	var z0, z1 float64
	if k <= 0 && tp == 0 {
		// Plain temperature (and min_p): no histogram needed.
		for i, v := range row {
			d := top - v*invT
			x := float32(0)
			if d <= limit { // excludes min_p misses, -inf and NaN
				x = expNeg(d)
			}
			e[i] = x
			if i&1 == 0 {
				z0 += float64(x)
			} else {
				z1 += float64(x)
			}
		}
	} else {
		clear(s.cnt[:])
		clear(s.mass[:])
		for i, v := range row {
			d := top - v*invT
			if !(d <= limit) {
				e[i], bkt[i] = 0, excluded
				continue
			}
			x := expNeg(d)
			b := lastBucket
			if d < bucketsLimit {
				b = int(d * bucketScale)
			}
			e[i], bkt[i] = x, uint8(b)
			s.cnt[b]++
			s.mass[b] += float64(x)
			if i&1 == 0 {
				z0 += float64(x)
			} else {
				z1 += float64(x)
			}
		}
	}
	z := z0 + z1
	total := 0
	if k > 0 {
		for b := range lastBucket + 1 {
			total += int(s.cnt[b])
		}
		if k >= total {
			k = 0
		}
	} else {
		k = 0
	}
	if k == 0 && tp == 0 {
		// Plain temperature (and min_p): draw over the dense array.
		target := u * z
		var acc float64
		last := int32(-1)
		for i, x := range e {
			if x == 0 {
				continue
			}
			acc += float64(x)
			last = int32(i)
			if acc > target {
				return int32(i)
			}
		}
		if last < 0 {
			return argmax(row)
		}
		return last
	}
	idx, val := s.idx, s.val
	V := len(row)
	if k > 0 {
		// Top-k: the boundary bucket holds the k-th largest; the buckets
		// above it are kept whole, only the boundary one is selected in.
		boundary, before := lastBucket, 0
		for b := range lastBucket + 1 {
			c := int(s.cnt[b])
			if before+c >= k {
				boundary = b
				break
			}
			before += c
		}
		nf, nb := s.split(boundary)
		need := min(k-nf, nb)
		selectTop(idx[V-nb:V], val[V-nb:V], need)
		copy(idx[nf:], idx[V-nb:V-nb+need])
		copy(val[nf:], val[V-nb:V-nb+need])
		n := nf + need
		if n == 0 {
			return argmax(row)
		}
		if tp > 0 {
			n = nucleus(idx[:n], val[:n], tp*sum(val[:n]))
		}
		return pick(idx[:n], val[:n], u)
	}
	// Top-p: the boundary bucket is where the running mass reaches p; the
	// buckets above it are kept whole and the nucleus is completed from the
	// boundary bucket alone.
	need := tp * z
	boundary := lastBucket
	var acc float64
	for b := range lastBucket + 1 {
		if acc+s.mass[b] >= need {
			boundary = b
			break
		}
		acc += s.mass[b]
	}
	nf, nb := s.split(boundary)
	keep := 0
	if nb > 0 {
		keep = nucleus(idx[V-nb:V], val[V-nb:V], need-acc)
		copy(idx[nf:], idx[V-nb:V-nb+keep])
		copy(val[nf:], val[V-nb:V-nb+keep])
	}
	if nf+keep == 0 {
		return argmax(row)
	}
	return pick(idx[:nf+keep], val[:nf+keep], u)
}

// split gathers the candidates of the buckets above boundary at the front
// of (idx, val) and those of the boundary bucket at the back, returning
// both counts. Every element is stored to both ends and the counts advance
// by comparison results, so the loop has no data-dependent branch (about
// half the elements of a flat distribution pass, which a branch would
// mispredict). The arrays have one spare slot so the two ends never meet.
func (s *worker) split(boundary int) (nf, nb int) {
	idx, val, e := s.idx, s.val, s.e
	V := len(s.bkt)
	end := len(idx) - 1 // == V
	for i, b := range s.bkt {
		x := e[i]
		idx[nf], val[nf] = int32(i), x
		idx[end-nb], val[end-nb] = int32(i), x
		nf += b2i(int(b) < boundary)
		nb += b2i(int(b) == boundary)
	}
	// Move the back group to [V-nb, V) where callers expect it.
	copy(idx[V-nb:V], idx[end-nb+1:end+1])
	copy(val[V-nb:V], val[end-nb+1:end+1])
	return nf, nb
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
// capacity for k).
func (s *worker) logprobs(tok int32, k int, lp *ipc.TokenLogprobs, ids []int32, lps []float32) {
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
		// Insertion into a sorted list of at most k (descending; ties keep
		// the lower id first).
		for i, v := range raw {
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
			lps[j], ids[j] = v, int32(i)
		}
		for i := range lps {
			lps[i] = float32(float64(lps[i]) - lse)
		}
	}
	lp.TopIDs, lp.TopLogprobs = ids, lps
}
