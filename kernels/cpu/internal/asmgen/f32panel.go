package asmgen

import "fmt"

// f32panel writes f32panel_amd64.s: panel{6,4,2,1}AVX2, the AVX2+FMA twins of the AVX-512 panel kernels (same
// arguments, same packed layout, same R rows × 64 columns per call).
//
// With 16 ymm registers a call cannot hold the 4·R zmm-wide accumulators
// of the AVX-512 kernels, so it walks the block's four 16-column panels
// in passes of G panels, holding 2·R·G ymm accumulators (R=6: G=1, 12
// accumulators; R=4: G=1, 8; R=2: G=2, 8; R=1: G=4, 8, every panel
// stream at once, as batch-1 decode streams the weights from memory). Each
// output still accumulates x[r][kk]·w[kk] over kk = 0, 1, … with one FMA
// per step into a zeroed accumulator, so results are bit-identical to the
// AVX-512 kernels and independent of R.
//
// There are no prefetching (pf) variants: on Zen 3 the hardware
// prefetcher follows the panel streams, and software prefetch 2 KiB ahead
// cost CPU time at batch 1 (27.0–32.2 against 20.9–29.4 CPU-ms per 110M
// step's products, 7 alternated pairs) and gained nothing measurable at 16
// rows. The k loop takes two steps per iteration (paired, 110M step's
// products, CPU-ms: 16 rows 65.1–80.8 against 71.3–98.4, 32 rows
// 125.6–135.8 against 138.8–144.7; batch 1 unchanged within noise).
func f32panel() string {
	var a asm
	a.header()
	a.lines(`
// AVX2 panel GEMM kernels (see panel.go): the twins of panel_amd64.s for
// CPUs with AVX2 and FMA but not AVX-512. Each computes R rows × 64
// columns of out = x · wᵀ from weights packed as 16-column panels (ps
// floats apart), in passes of G panels (R·G ≤ 6 and G ≤ 4): per k, 2·G
// panel loads (32 bytes each) and R broadcasts of x[r][k] feed 2·R·G FMAs
// into as many ymm accumulators. Every output accumulates over k in the
// same order as the AVX-512 kernels, whatever R is.`)
	for _, R := range []int{6, 4, 2, 1} {
		a.l(``)
		a.f32panelKernel(R)
	}
	return a.b.String()
}

// f32panelKernel writes panel{R}AVX2.
func (a *asm) f32panelKernel(R int) {
	G := map[int]int{6: 1, 4: 1, 2: 2, 1: 4}[R]
	passes := 4 / G
	name := fmt.Sprintf("panel%dAVX2", R)
	lbl := fmt.Sprintf("p%dx2", R)
	nacc := 2 * R * G
	// Weights go into registers when they fit beside the accumulators and
	// two broadcast registers; otherwise the FMAs read them from memory.
	inRegs := nacc+2*G+2 <= 16
	wreg := nacc // first weight register
	breg := nacc
	if inRegs {
		breg = nacc + 2*G
	}
	xaddr := []string{"(SI)", "(SI)(R8*1)", "(SI)(R8*2)", "(SI)(R9*1)", "(SI)(R8*4)", "(SI)(R10*1)"}
	paddr := []string{"(DI)", "(DI)(R15*1)", "(DI)(R15*2)", "(DI)(R14*1)"}
	a.l(`// func %s(x *float32, xs int, p *float32, ps int, k int, out *float32, os int)`, name)
	a.l(`TEXT ·%s(SB), NOSPLIT, $0-56`, name)
	a.l("\tMOVQ xs+8(FP), R8")
	a.l("\tSHLQ $2, R8")
	if R >= 4 {
		a.l("\tLEAQ (R8)(R8*2), R9")
	}
	if R >= 6 {
		a.l("\tLEAQ (R8)(R8*4), R10")
	}
	a.l("\tMOVQ p+16(FP), R13")
	a.l("\tMOVQ ps+24(FP), R15")
	a.l("\tSHLQ $2, R15")
	if G == 4 {
		a.l("\tLEAQ (R15)(R15*2), R14")
	}
	a.l("\tMOVQ out+40(FP), DX")
	a.l("\tMOVQ os+48(FP), AX")
	a.l("\tSHLQ $2, AX")
	if passes > 1 {
		a.l("\tMOVQ $%d, BX", passes)
		a.l("%spass:", lbl)
	}
	a.l("\tMOVQ x+0(FP), SI")
	a.l("\tMOVQ R13, DI")
	a.l("\tMOVQ k+32(FP), CX")
	for i := 0; i < nacc; i++ {
		a.l("\tVXORPS Y%d, Y%d, Y%d", i, i, i)
	}
	// step emits one k step, u steps past (SI, DI).
	step := func(u int) {
		disp := func(off int, addr string) string {
			if off == 0 {
				return addr
			}
			return fmt.Sprintf("%d%s", off, addr)
		}
		wop := func(g, h int) string { return disp(64*u+32*h, paddr[g]) }
		if inRegs {
			for g := 0; g < G; g++ {
				for h := 0; h < 2; h++ {
					a.l("\tVMOVUPS %s, Y%d", wop(g, h), wreg+2*g+h)
				}
			}
		}
		for r := 0; r < R; r++ {
			b := breg + r%2
			a.l("\tVBROADCASTSS %s, Y%d", disp(4*u, xaddr[r]), b)
			for g := 0; g < G; g++ {
				for h := 0; h < 2; h++ {
					src := wop(g, h)
					if inRegs {
						src = fmt.Sprintf("Y%d", wreg+2*g+h)
					}
					a.l("\tVFMADD231PS %s, Y%d, Y%d", src, b, r*2*G+2*g+h)
				}
			}
		}
	}
	// Two k steps per iteration, then an odd last one.
	a.l("\tCMPQ CX, $2")
	a.l("\tJLT %stail", lbl)
	a.l("%sloop:", lbl)
	step(0)
	step(1)
	a.l("\tADDQ $8, SI")
	a.l("\tADDQ $128, DI")
	a.l("\tSUBQ $2, CX")
	a.l("\tCMPQ CX, $2")
	a.l("\tJGE %sloop", lbl)
	a.l("%stail:", lbl)
	a.l("\tTESTQ CX, CX")
	a.l("\tJEQ %sstore", lbl)
	step(0)
	a.l("%sstore:", lbl)
	a.l("\tMOVQ DX, R12")
	for r := 0; r < R; r++ {
		for g := 0; g < G; g++ {
			for h := 0; h < 2; h++ {
				off := 64*g + 32*h
				dst := "(R12)"
				if off > 0 {
					dst = fmt.Sprintf("%d(R12)", off)
				}
				a.l("\tVMOVUPS Y%d, %s", r*2*G+2*g+h, dst)
			}
		}
		if r < R-1 {
			a.l("\tADDQ AX, R12")
		}
	}
	if passes > 1 {
		a.l("\tADDQ $%d, DX", 64*G)
		if G == 1 {
			a.l("\tADDQ R15, R13")
		} else {
			a.l("\tLEAQ (R13)(R15*%d), R13", G)
		}
		a.l("\tDECQ BX")
		a.l("\tJNZ %spass", lbl)
	}
	a.l("\tVZEROUPPER")
	a.l("\tRET")
}
