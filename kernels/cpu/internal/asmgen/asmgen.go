// Package asmgen generates the assembly of package cpu:
// panel_amd64.s (the panel GEMM kernels, one per row count),
// exp_amd64.s (vector exp and the loops built on it), kv16_amd64.s (the
// float16 KV-cache kernels), attn2_amd64.s (their AVX2 twins),
// qdotgen_amd64.s (the AVX2 kernels on stored weight encodings),
// qtile_amd64.s (batched tiles on block-quantized weights), qtile8_amd64.s
// (their ×8 tiles), qtilek_amd64.s (the Q4_K ×8 tiles on unpacked scales), qtilekt_amd64.s
// (the Q4_K tiles on transposed super-blocks), qtilektn_amd64.s (the same
// for any number of groups of 8 rows), f16round_amd64.s
// (float16 rounding of the F16-cache softmax), mxfp4_amd64.s (the MXFP4
// weight kernels), krows_amd64.s (two-row k-quant row loops), ks2_amd64.s
// and ks2_amd64.go (the two-stream Q4_K row loop, from ks2.go), q8rows_amd64.s
// (the prefetching Q8_0 and unsigned-nibble Q4_0 row loops), q6rows_amd64.s
// (the Q6_K row loop with its scales in registers, the Q5_K loop prefetching
// farther ahead), q6s2_amd64.s and q6s2_amd64.go (the two-stream Q6_K row
// loop, from q6s2.go), f32panel_amd64.s (the AVX2 twins of the
// panel kernels), q6tile_amd64.s (the Q6_K ×8 tile on unpacked rows) and
// q6tilen_amd64.s (the Q6_K tile on transposed super-blocks for many
// groups of 8 rows). The kernels differ
// only in register numbering and unrolling, which a generator states once
// instead of four times by hand.
//
// half.go writes half_amd64.s (the F16/BF16 batch tiles) and its Go
// declarations, half_amd64.go; halfrow.go writes halfrow_amd64.s (the
// three-stream F16/BF16 batch-1 loops) and halfrow_amd64.go.
//
// q8tile.go writes q8tile_amd64.s (the Q8_0 and unsigned-nibble Q4_0 ×8
// tiles folded with unpacks).
//
// mxtile.go writes mxtile_amd64.s (the MXFP4 tiles with the activation
// rows' scale tables) and its Go declarations, mxtile_amd64.go.
//
// mxvnni.go writes mxvnni_amd64.s (the AVX-512 VNNI twins of the MXFP4
// table kernels) and mxvnni_amd64.go.
//
// mxgroup.go writes mxgroup_amd64.s (MXFP4 tiles of up to 8 activation
// rows quantized in groups of blocks, integer sums across a group) and
// mxgroup_amd64.go.
//
// attngqa.go writes attngqa_amd64.s (attention kernels serving all the
// query heads of a KV head in one pass over its rows) and attngqa_amd64.go.
//
// vadd.go writes vadd_amd64.s (the backend's element-wise bias and
// weighted adds, bit-equal to the Go loops) and vadd_amd64.go.
//
// q6v.go writes q6v_amd64.s (the Q6_K transposed tile on AVX-512 VNNI, two
// weight rows per Z register) and q5v.go q5v_amd64.s (the Q5_K ×8 and
// transposed tiles on AVX-512 VNNI, and Q5_K on k4v.go's VPDPBUSD tiles); q5rows.go writes q5rows_amd64.s (the
// Q5_K batch-1 row loops on AVX-512 VNNI) and q5rows_amd64.go; q6vrows.go
// writes q6vrows_amd64.s (the Q6_K batch-1 row loops on AVX-512 VNNI) and
// q6vrows_amd64.go.
//
// prefetch.go writes prefetch_amd64.s (the row prefetches into L1 and
// L2) and prefetch_amd64.go.
//
// swiglu.go writes swiglu_amd64.s (gpt-oss's clamped SwiGLU, bit-equal to
// the Go loop) and swiglu_amd64.go.
//
//	go test ./kernels/cpu -run TestGenerated -update
//
// rewrites them; TestGenerated fails when the committed files differ from
// what Files returns.
package asmgen

import (
	"fmt"
	"math"
	"strings"
)

// Files returns the generated files by name.
func Files() map[string]string {
	return map[string]string{"panel_amd64.s": panel(), "exp_amd64.s": expFile(), "kv16_amd64.s": kv16(),
		"attn2_amd64.s": attn2(), "qdotgen_amd64.s": qdot(), "mxfp4_amd64.s": mxfp4File(), "qtile_amd64.s": qtile(),
		"krows_amd64.s": krows(),
		"ks2_amd64.s":   ks2File(), "ks2_amd64.go": ks2Decls(),
		"k4rp_amd64.s": k4rpFile(), "k4rp_amd64.go": k4rpDecls(),
		"k4v_amd64.s": k4vFile(), "k4v_amd64.go": k4vDecls(),
		"q6rows_amd64.s": q6rows(),
		"q6s2_amd64.s":   q6s2File(), "q6s2_amd64.go": q6s2Decls(),
		"f32panel_amd64.s": f32panel(),
		"qtile8_amd64.s":   qtile8(),
		"qtilek_amd64.s":   qtilekFile(),
		"qtilekt_amd64.s":  qtilektFile(),
		"qtilektn_amd64.s": qtilektnFile(),
		"f16round_amd64.s": f16round(),
		"q8rows_amd64.s":   q8rows(),
		"half_amd64.s":     halfFile(), "half_amd64.go": halfDecls(),
		"halfrow_amd64.s": halfRowFile(), "halfrow_amd64.go": halfRowDecls(),
		"mxtile_amd64.s": mxtileFile(), "mxtile_amd64.go": mxtileDecls(),
		"vadd_amd64.s": vaddFile(), "vadd_amd64.go": vaddDecls(),
		"q8s3_amd64.s": q8s3File(), "q8s3_amd64.go": q8s3Decls(),
		"halfpanel_amd64.s": halfPanelFile(), "halfpanel_amd64.go": halfPanelDecls(),
		"halfz_amd64.s": halfZFile(), "halfz_amd64.go": halfZDecls(),
		"halfs_amd64.s": halfSFile(), "halfs_amd64.go": halfSDecls(),
		"q8tile_amd64.s":  q8tileFile(),
		"q8vnni_amd64.s":  q8vnniFile(),
		"q8z_amd64.s":     q8zFile(),
		"q6tile_amd64.s":  q6tileFile(),
		"q6tilen_amd64.s": q6tilenFile(),
		"q6v_amd64.s":     q6vFile(),
		"q6kv_amd64.s":    q6kvFile(), "q6kv_amd64.go": q6kvDecls(),
		"q5v_amd64.s":    q5vFile(),
		"q5rows_amd64.s": q5rowsFile(), "q5rows_amd64.go": q5rowsDecls(),
		"q6vrows_amd64.s": q6vrowsFile(), "q6vrows_amd64.go": q6vrowsDecls(),
		"mxgroup_amd64.s": mxgroupFile(), "mxgroup_amd64.go": mxgroupDecls(),
		"mxvnni_amd64.s": mxvnniFile(), "mxvnni_amd64.go": mxvnniDecls(),
		"swiglu_amd64.s": swigluFile(), "swiglu_amd64.go": swigluDecls(),
		"attngqa_amd64.s": attnGQA(), "attngqa_amd64.go": attnGQADecls(),
		"prefetch_amd64.s": prefetchFile(), "prefetch_amd64.go": prefetchDecls(),
	}
}

type asm struct {
	b strings.Builder
	// k4rp makes the Q4_K tiles on transposed super-blocks read weights
	// repacked by kernels/cpu's repackQ4K (k4rp.go): their functions are
	// named with an R before AVX2 and decode with transposeD4x2.
	k4rp bool
}

// k4Name returns a Q4_K tile's function name (dotQ4K…AVX2), with the R of
// the repacked variant where a.k4rp.
func (a *asm) k4Name(stem string) string {
	if a.k4rp {
		return stem + "RAVX2"
	}
	return stem + "AVX2"
}

// header writes the build constraint, include and generated-code notice
// every generated file starts with.
func (a *asm) header() {
	a.b.WriteString("//go:build amd64 && !purego\n\n#include \"textflag.h\"\n\n// Code generated by asmgen; DO NOT EDIT.\n\n")
}

func (a *asm) l(format string, args ...any) {
	fmt.Fprintf(&a.b, format, args...)
	a.b.WriteByte('\n')
}

// panelAhead is the prefetch distance of the pf kernels, in bytes of each
// panel stream (32 steps of k).
const panelAhead = 2048

// panel writes panel{6,4,2,1}AVX512 and their pf variants.
func panel() string {
	var a asm
	a.header()
	a.l(`// Panel GEMM kernels (see panel.go). Each computes R rows × 64 columns of`)
	a.l(`// out = x · wᵀ from weights packed as 16-column panels (panel q holds, for`)
	a.l(`// every k, the 16 weights of columns 16q..16q+15 at k; panels are ps floats`)
	a.l(`// apart): per k, four 64-byte panel loads and R broadcasts of x[r][k] feed`)
	a.l(`// 4·R FMAs into 4·R zmm accumulators, so no horizontal sums are needed and`)
	a.l(`// every output accumulates over k in the same order whatever R is.`)
	a.l(`// The pf variants also prefetch each panel stream panelAhead bytes ahead:`)
	a.l(`// the caller uses them for a block's first row group, which streams the`)
	a.l(`// weights from memory (later groups find them in L2).`)
	xaddr := []string{"(SI)", "(SI)(R8*1)", "(SI)(R8*2)", "(SI)(R9*1)", "(SI)(R8*4)", "(SI)(R10*1)"}
	for _, v := range []struct {
		R  int
		pf bool
	}{{6, false}, {4, false}, {2, false}, {1, false}, {6, true}, {4, true}, {2, true}, {1, true}} {
		R, sfx := v.R, ""
		if v.pf {
			sfx = "pf"
		}
		a.l(``)
		a.l(`// func panel%d%sAVX512(x *float32, xs int, p *float32, ps int, k int, out *float32, os int)`, R, sfx)
		a.l(`TEXT ·panel%d%sAVX512(SB), NOSPLIT, $0-56`, R, sfx)
		a.l("\tMOVQ x+0(FP), SI")
		a.l("\tMOVQ xs+8(FP), R8")
		a.l("\tSHLQ $2, R8")
		if R >= 4 {
			a.l("\tLEAQ (R8)(R8*2), R9")
		}
		if R >= 6 {
			a.l("\tLEAQ (R8)(R8*4), R10")
		}
		a.l("\tMOVQ p+16(FP), DI")
		a.l("\tMOVQ ps+24(FP), R15")
		a.l("\tSHLQ $2, R15")
		a.l("\tLEAQ (R15)(R15*2), R14")
		a.l("\tMOVQ k+32(FP), CX")
		a.l("\tMOVQ out+40(FP), DX")
		a.l("\tMOVQ os+48(FP), AX")
		a.l("\tSHLQ $2, AX")
		for i := 0; i < 4*R; i++ {
			a.l("\tVPXORD Z%d, Z%d, Z%d", i, i, i)
		}
		a.l("\tTESTQ CX, CX")
		a.l("\tJEQ store%d%s", R, sfx)
		a.l("loop%d%s:", R, sfx)
		if v.pf {
			a.l("\tPREFETCHT0 %d(DI)", panelAhead)
			a.l("\tPREFETCHT0 %d(DI)(R15*1)", panelAhead)
			a.l("\tPREFETCHT0 %d(DI)(R15*2)", panelAhead)
			a.l("\tPREFETCHT0 %d(DI)(R14*1)", panelAhead)
		}
		a.l("\tVMOVUPS (DI), Z24")
		a.l("\tVMOVUPS (DI)(R15*1), Z25")
		a.l("\tVMOVUPS (DI)(R15*2), Z26")
		a.l("\tVMOVUPS (DI)(R14*1), Z27")
		for r := 0; r < R; r++ {
			b := 28 + r%4
			a.l("\tVBROADCASTSS %s, Z%d", xaddr[r], b)
			for q := 0; q < 4; q++ {
				a.l("\tVFMADD231PS Z%d, Z%d, Z%d", 24+q, b, 4*r+q)
			}
		}
		a.l("\tADDQ $4, SI")
		a.l("\tADDQ $64, DI")
		a.l("\tDECQ CX")
		a.l("\tJNZ loop%d%s", R, sfx)
		a.l("store%d%s:", R, sfx)
		for r := 0; r < R; r++ {
			for q := 0; q < 4; q++ {
				off := "(DX)"
				if q > 0 {
					off = fmt.Sprintf("%d(DX)", 64*q)
				}
				a.l("\tVMOVUPS Z%d, %s", 4*r+q, off)
			}
			if r < R-1 {
				a.l("\tADDQ AX, DX")
			}
		}
		a.l("\tVZEROUPPER")
		a.l("\tRET")
	}
	return a.b.String()
}

func bits(f float64) string { return fmt.Sprintf("0x%08x", math.Float32bits(float32(f))) }

// expConsts broadcasts the constants of the exp polynomial into Z16–Z25.
func (a *asm) expConsts() {
	for i, v := range []float64{1.44269504088896341, 0.693359375, -2.12194440e-4,
		1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
		1.6666665459e-1, 5.0000001201e-1, 1.0} {
		a.l("\tMOVL $%s, AX", bits(v))
		a.l("\tVPBROADCASTD AX, Z%d", 16+i)
	}
}

// exp sets x = exp(x), clobbering t1 and t2 (expf's reduction and
// polynomial; VSCALEFPS applies 2^n).
func (a *asm) exp(x, t1, t2 string) {
	a.l("\tVMULPS Z16, %s, %s", x, t1)
	a.l("\tVRNDSCALEPS $0, %s, %s", t1, t1)
	a.l("\tVFNMADD231PS Z17, %s, %s", t1, x)
	a.l("\tVFNMADD231PS Z18, %s, %s", t1, x)
	a.l("\tVMOVAPS Z19, %s", t2)
	for c := 20; c <= 24; c++ {
		a.l("\tVFMADD213PS Z%d, %s, %s", c, x, t2)
	}
	a.l("\tVMULPS %s, %s, %s", x, t2, t2)
	a.l("\tVFMADD213PS %s, %s, %s", x, x, t2)
	a.l("\tVADDPS Z25, %s, %s", t2, t2)
	a.l("\tVSCALEFPS %s, %s, %s", t1, t2, x)
}

func (a *asm) lines(s string) {
	for _, ln := range strings.Split(strings.TrimSpace(s), "\n") {
		a.l("%s", strings.TrimSpace(ln))
	}
}

func (a *asm) code(s string) {
	for _, ln := range strings.Split(strings.TrimSpace(s), "\n") {
		ln = strings.TrimSpace(ln)
		if strings.HasSuffix(ln, ":") {
			a.l("%s", ln)
		} else {
			a.l("\t%s", ln)
		}
	}
}

// hsum4Store reduces the float accumulators Y0-Y3 (one output in each)
// horizontally and stores the 4 sums at (DX); it clobbers Y1 and Y2.
func (a *asm) hsum4Store() {
	a.code(`
VHADDPS Y1, Y0, Y0
VHADDPS Y3, Y2, Y2
VHADDPS Y2, Y0, Y0
VEXTRACTF128 $1, Y0, X1
VADDPS X1, X0, X0
VMOVUPS X0, (DX)`)
}

func expFile() string {
	var a asm
	a.header()
	a.lines(`
// Vector exp (the Cephes-style reduction and polynomial of expf, 16 lanes;
// VSCALEFPS applies 2^n, so huge negative arguments give 0 and huge
// positive ones +Inf) and the loops built on it. Lengths are multiples of
// 16; callers handle tails.`)
	a.l(``)
	a.expLoops(isa512)
	a.l(``)
	a.wsum64(false)
	a.l(``)
	a.scores4(false)
	a.l(``)
	a.scaleMul512()
	return a.b.String()
}

// kv16 writes the kernels of an F16 KV cache: conversion on write, and the
// score and value-sum loops of attention reading F16 keys and values
// (VCVTPH2PS widens 16 halves per load).
func kv16() string {
	var a asm
	a.header()
	a.lines(`
// F16 KV-cache kernels (see kv16.go). Lengths are multiples of 16; callers
// handle tails.`)
	a.l(``)
	a.lines(`
// func f32ToF16AVX512(dst *uint16, src *float32, n int)
// dst[i] = float16(src[i]), rounding to nearest even.`)
	a.l(`TEXT ·f32ToF16AVX512(SB), NOSPLIT, $0-24`)
	a.code(`
MOVQ dst+0(FP), DI
MOVQ src+8(FP), SI
MOVQ n+16(FP), CX
TESTQ CX, CX
JEQ cvtdone
cvtloop:
VMOVUPS (SI), Z0
VCVTPS2PH $0, Z0, Y1
VMOVDQU Y1, (DI)
ADDQ $64, SI
ADDQ $32, DI
SUBQ $16, CX
JNZ cvtloop
cvtdone:
VZEROUPPER
RET`)
	a.l(``)
	a.scores4(true)
	a.l(``)
	a.wsum64(true)
	return a.b.String()
}

// kvLoad returns the assembly that makes zmm reg hold 16 cache elements at
// addr (with half, widened from float16 into tmp) and the operand an FMA
// takes for them: the memory operand itself for float32.
func kvLoad(half bool, addr, tmp string) (pre, operand string) {
	if half {
		return fmt.Sprintf("\tVCVTPH2PS %s, %s\n", addr, tmp), tmp
	}
	return "", addr
}

// wsum64 writes wsum64AVX512 (float32 values) or, with half,
// wsum64F16AVX512: out[d] += Σ_p w[p]·v[p*stride+d] for hd a multiple of
// 64, four independent accumulators per 64 columns.
func (a *asm) wsum64(half bool) {
	name, vt, eb, lbl := "wsum64AVX512", "float32", 4, "w64"
	if half {
		name, vt, eb, lbl = "wsum64F16AVX512", "uint16", 2, "hw"
	}
	a.l("// func %s(w *float32, v *%s, stride int, n int, hd int, out *float32)", name, vt)
	a.l("// out[d] += sum_p w[p] * v[p*stride+d] for d < hd (a multiple of 64): per 64")
	a.l("// columns, four independent accumulators take each position's weight.")
	a.l("TEXT ·%s(SB), NOSPLIT, $0-48", name)
	a.code(fmt.Sprintf(`
MOVQ w+0(FP), SI
MOVQ v+8(FP), DI
MOVQ stride+16(FP), R8
SHLQ $%d, R8
MOVQ n+24(FP), CX
MOVQ hd+32(FP), R9
SHLQ $2, R9
MOVQ out+40(FP), DX
TESTQ CX, CX
JEQ %sdone
XORQ BX, BX`, eb/2, lbl))
	voff := "BX" // byte offset of the chunk in a value row
	if half {
		a.l("\tXORQ AX, AX")
		voff = "AX"
	}
	a.l("%schunk:", lbl)
	for i := 0; i < 4; i++ {
		a.l("\tVMOVUPS %s(DX)(BX*1), Z%d", off(64*i), i)
	}
	a.l("\tMOVQ SI, R10")
	a.l("\tLEAQ (DI)(%s*1), R11", voff)
	a.l("\tMOVQ CX, R12")
	a.l("%spos:", lbl)
	a.l("\tVBROADCASTSS (R10), Z4")
	for i := 0; i < 4; i++ {
		pre, op := kvLoad(half, off(16*eb*i)+"(R11)", fmt.Sprintf("Z%d", 5+i))
		a.b.WriteString(pre)
		a.l("\tVFMADD231PS %s, Z4, Z%d", op, i)
	}
	a.code(fmt.Sprintf(`
ADDQ $4, R10
ADDQ R8, R11
DECQ R12
JNZ %spos`, lbl))
	for i := 0; i < 4; i++ {
		a.l("\tVMOVUPS Z%d, %s(DX)(BX*1)", i, off(64*i))
	}
	a.l("\tADDQ $256, BX")
	if half {
		a.l("\tADDQ $128, AX")
	}
	a.code(fmt.Sprintf(`
CMPQ BX, R9
JLT %schunk
%sdone:
VZEROUPPER
RET`, lbl, lbl))
}

// scores4 writes scores4AVX512 (float32 keys) or, with half,
// scores4F16AVX512: out[p] = q · k[p*stride : p*stride+hd] for n (a
// multiple of 4) keys, four at a time in four accumulators reduced together.
func (a *asm) scores4(half bool) {
	name, kt, eb, lbl := "scores4AVX512", "float32", 4, "s4"
	if half {
		name, kt, eb, lbl = "scores4F16AVX512", "uint16", 2, "h4"
	}
	a.l("// func %s(q *float32, k *%s, stride int, n int, hd int, out *float32)", name, kt)
	a.l("// out[p] = q · k[p*stride : p*stride+hd] for n (a multiple of 4) keys, four")
	a.l("// at a time in independent accumulators; stride is in elements.")
	a.l("TEXT ·%s(SB), NOSPLIT, $0-48", name)
	a.code(fmt.Sprintf(`
MOVQ q+0(FP), SI
MOVQ k+8(FP), DI
MOVQ stride+16(FP), R8
SHLQ $%d, R8
LEAQ (R8)(R8*2), R13
MOVQ n+24(FP), CX
MOVQ hd+32(FP), R9
SHLQ $%d, R9
MOVQ out+40(FP), DX
TESTQ CX, CX
JEQ %sdone
%skeys:
VPXORD Z0, Z0, Z0
VPXORD Z1, Z1, Z1
VPXORD Z2, Z2, Z2
VPXORD Z3, Z3, Z3
XORQ BX, BX`, eb/2, eb/2, lbl, lbl))
	qoff := "BX" // byte offset in q (BX is the offset in the keys)
	if half {
		a.l("\tXORQ AX, AX")
		qoff = "AX"
	}
	a.code(fmt.Sprintf(`
LEAQ (DI)(R8*1), R10
LEAQ (DI)(R8*2), R11
LEAQ (DI)(R13*1), R12
%sinner:
VMOVUPS (SI)(%s*1), Z4`, lbl, qoff))
	for i, base := range []string{"DI", "R10", "R11", "R12"} {
		pre, op := kvLoad(half, fmt.Sprintf("(%s)(BX*1)", base), fmt.Sprintf("Z%d", 5+i))
		a.b.WriteString(pre)
		a.l("\tVFMADD231PS %s, Z4, Z%d", op, i)
	}
	if half {
		a.l("\tADDQ $64, AX")
	}
	a.l("\tADDQ $%d, BX", 16*eb)
	a.code(fmt.Sprintf(`
CMPQ BX, R9
JLT %sinner`, lbl))
	for i := 0; i < 4; i++ {
		a.l("\tVEXTRACTF64X4 $1, Z%d, Y4", i)
		a.l("\tVADDPS Y4, Y%d, Y%d", i, i)
	}
	for i := 0; i < 4; i++ {
		a.l("\tVEXTRACTF128 $1, Y%d, X4", i)
		a.l("\tVADDPS X4, X%d, X%d", i, i)
	}
	a.code(fmt.Sprintf(`
VHADDPS X1, X0, X0
VHADDPS X3, X2, X2
VHADDPS X2, X0, X0
VMOVUPS X0, (DX)
ADDQ $16, DX
LEAQ (DI)(R8*4), DI
SUBQ $4, CX
JNZ %skeys
%sdone:
VZEROUPPER
RET`, lbl, lbl))
}

// off formats a displacement, empty for 0.
func off(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprint(n)
}
