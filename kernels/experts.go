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
