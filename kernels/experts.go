package kernels

import "fmt"

// ExpertMatMuler is implemented by backends that run a routed batch
// through a set of experts in one op, the heart of a mixture-of-experts
// block (the CPU and reference backends implement it).
type ExpertMatMuler interface {
	// MatMulExperts sets, for every g < len(w), rows [start[g], start[g+1])
	// of out to the same rows of x times w[g]ᵀ. The caller groups the rows
	// routed to each expert together, so that each expert's weight is read
	// once per call however many rows chose it. Every w[g] has the same
	// shape [outDim × inDim] and encoding; a group with no rows reads
	// nothing (its w[g] may be nil). len(start) is len(w)+1, start[0] is 0
	// and start is non-decreasing; out and x have at least start[len(w)]
	// rows.
	MatMulExperts(out, x Tensor, w []Tensor, start []int32)
}

// ExpertPairMatMuler is implemented by backends that also run two
// projections of the same routed rows (the experts' gate and up) as one
// op (the CPU and reference backends implement it).
type ExpertPairMatMuler interface {
	// MatMulExpertPair sets outA as MatMulExperts(outA, x, wA, start)
	// does and outB as MatMulExperts(outB, x, wB, start), the same values,
	// in one op. wA[g] and wB[g] have rows for the same groups and all
	// have one shape and encoding.
	MatMulExpertPair(outA, outB, x Tensor, wA, wB []Tensor, start []int32)
}

// CheckExpertPair reports a MatMulExpertPair call that breaks the op's
// contract: backends call it before running the op.
func CheckExpertPair(outA, outB, x Tensor, wA, wB []Tensor, start []int32) error {
	if len(wA) != len(wB) {
		return fmt.Errorf("kernels: MatMulExpertPair: %d and %d experts", len(wA), len(wB))
	}
	if err := CheckExperts(outA, x, wA, start); err != nil {
		return err
	}
	if err := CheckExperts(outB, x, wB, start); err != nil {
		return err
	}
	for g := range wA {
		if start[g+1] == start[g] {
			continue
		}
		a, b := wA[g], wB[g]
		if a.Rows() != b.Rows() || a.Cols() != b.Cols() || a.DType() != b.DType() {
			return fmt.Errorf("kernels: MatMulExpertPair: expert %d is %d×%d %v and %d×%d %v", g, a.Rows(), a.Cols(), a.DType(), b.Rows(), b.Cols(), b.DType())
		}
	}
	return nil
}

// CheckExperts reports a MatMulExperts call that breaks the op's contract:
// backends call it before running the op.
func CheckExperts(out, x Tensor, w []Tensor, start []int32) error {
	if len(start) != len(w)+1 || (len(start) > 0 && start[0] != 0) {
		return fmt.Errorf("kernels: MatMulExperts: %d group starts for %d experts", len(start), len(w))
	}
	var in, outDim int
	var dt DType
	first := true
	for g, t := range w {
		if start[g+1] < start[g] {
			return fmt.Errorf("kernels: MatMulExperts: group %d ends at %d before it starts at %d", g, start[g+1], start[g])
		}
		if start[g+1] == start[g] {
			continue
		}
		if t == nil {
			return fmt.Errorf("kernels: MatMulExperts: expert %d has rows but no weight", g)
		}
		if first {
			in, outDim, dt, first = t.Cols(), t.Rows(), t.DType(), false
		} else if t.Cols() != in || t.Rows() != outDim || t.DType() != dt {
			return fmt.Errorf("kernels: MatMulExperts: expert %d is %d×%d %v, expert before is %d×%d %v", g, t.Rows(), t.Cols(), t.DType(), outDim, in, dt)
		}
	}
	n := int(start[len(w)])
	if first {
		return nil
	}
	if x.Cols() != in || out.Cols() < outDim || x.Rows() < n || out.Rows() < n {
		return fmt.Errorf("kernels: MatMulExperts: x %d×%d, out %d×%d for %d rows of %d×%d experts", x.Rows(), x.Cols(), out.Rows(), out.Cols(), n, outDim, in)
	}
	return nil
}

// HostRows returns a view of rows [lo, hi) of the F32 host tensor h (no
// copy: writes through the view reach h).
func HostRows(h *Host, lo, hi int) *Host {
	return &Host{R: hi - lo, C: h.C, DT: F32, F: h.F[lo*h.C : hi*h.C]}
}

// MatMulExperts implements ExpertMatMuler with MatMulRef on each group.
func (r *Ref) MatMulExperts(out, x Tensor, w []Tensor, start []int32) {
	if err := CheckExperts(out, x, w, start); err != nil {
		panic(err)
	}
	oh, xh := out.(*Host), x.(*Host)
	for g, t := range w {
		lo, hi := int(start[g]), int(start[g+1])
		if hi > lo {
			MatMulRef(HostRows(oh, lo, hi), HostRows(xh, lo, hi), t.(*Host), hi-lo)
		}
	}
}

// MatMulExpertPair implements ExpertPairMatMuler with two MatMulExperts.
func (r *Ref) MatMulExpertPair(outA, outB, x Tensor, wA, wB []Tensor, start []int32) {
	if err := CheckExpertPair(outA, outB, x, wA, wB, start); err != nil {
		panic(err)
	}
	r.MatMulExperts(outA, x, wA, start)
	r.MatMulExperts(outB, x, wB, start)
}

var (
	_ ExpertMatMuler     = (*Ref)(nil)
	_ ExpertPairMatMuler = (*Ref)(nil)
)
