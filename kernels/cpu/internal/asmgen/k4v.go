package asmgen

import (
	"fmt"
	"strings"
)

// k4vFile writes k4v_amd64.s: the Q4_K tiles on repacked weights (×8, ×16
// and ×N groups of 8 activation rows) with AVX512_VNNI's VPDPBUSD.
//
// Lanes. A super-block's 256 values are held in four Z vectors of 64
// bytes; dword lane i = 4q+u (q, u < 4) of every vector belongs to
// sub-block w = 4(q/2)+u and half h = q%2 (values 16h..16h+15), so one
// VPDPBUSD per vector adds 4 products of one sub-block half into its
// lane (at most 16·15·128 < 2^15 per lane and super-block: no overflow,
// and the dword fits a word, so two rows pack into words exactly and one
// VPMADDWD against the scales as words applies them and adds each two
// lanes of a row).
//
// Weights. Two VPERMT2B per super-block gather the repacked quants
// (kernels/cpu k4rp.go: byte 32g+4j+k holds value 4j+k%2 of sub-block
// 2g+k/2 in its low nibble and the value two further on in its high
// nibble) so that byte 4i+p of vector pair c (c < 2) holds value
// 16h+8c+4(p/2)+p%2 of sub-block w (i ↔ w, h above) and the value two
// further on; its low nibbles are vector 2c, its high nibbles vector
// 2c+1.
//
// Activations (kernels/cpu k4v.go, actQ.kv, made once per MatMul in the
// strides of actQ.kt): byte 64v+4i+p of a row's super-block is value
// 32w+16h+8(v/2)+4(p/2)+p%2+2(v%2).
//
// Fold. Per 4 activation rows the 16 lanes are summed into [row 0-3 of
// values 0-15 | row 0-3 of values 16-31] (HADD4's layout in the AVX2
// tiles); every such integer equals the AVX2 tiles' (exact integer sums),
// and the fold after it is theirs operation for operation (on Z vectors,
// a group of 8 rows at once: kvtGroup), so the results equal
// dotQ4KTx8RAVX2's (and the file layout's tiles') bit for bit. The 6-bit
// scales and mins are unpacked by kvtScales (VBMI's VPERMB).
func k4vFile() string {
	var a asm
	a.header()
	a.lines(`
// The Q4_K tiles on repacked weights with AVX512_VNNI (see k4v.go in
// package asmgen and in kernels/cpu).`)
	a.l("")
	a.l("%s", macrosTile8)
	a.l("%s", k4vData())
	a.l("%s", k4vScaleData())
	a.l("%s", k4vTransposeData())
	a.kvt(1)
	a.kvt(2)
	a.kvtn()
	a.kvTranspose()
	return a.b.String()
}

// k4vLane returns the sub-block w and half h of dword lane i (k4vFile).
func k4vLane(i int) (w, h int) {
	q, u := i/4, i%4
	return 4*(q/2) + u, q % 2
}

// k4vData returns the constants: the two VPERMT2B byte indices (k4vperm,
// 128 bytes) and the VPERMW index of the scales (k4vsidx, 64 bytes: word
// k of the scale vector is the scale of lane 4(k/8)+k%4, as VPACKSSDW
// leaves two rows' lanes).
func k4vData() string {
	var b strings.Builder
	var idx [128]byte
	for c := 0; c < 2; c++ {
		for i := 0; i < 16; i++ {
			w, h := k4vLane(i)
			for p := 0; p < 4; p++ {
				idx[64*c+4*i+p] = byte(32*(w/2) + 4*(4*h+2*c+p/2) + 2*(w%2) + p%2)
			}
		}
	}
	for o := 0; o < 128; o += 8 {
		var v uint64
		for k := 7; k >= 0; k-- {
			v = v<<8 | uint64(idx[o+k])
		}
		fmt.Fprintf(&b, "DATA k4vperm<>+%d(SB)/8, $0x%016x\n", o, v)
	}
	b.WriteString("GLOBL k4vperm<>(SB), RODATA|NOPTR, $128\n")
	for k := 0; k < 32; k++ {
		w, _ := k4vLane(4*(k/8) + k%4)
		fmt.Fprintf(&b, "DATA k4vsidx<>+%d(SB)/2, $%d\n", 2*k, w)
	}
	b.WriteString("GLOBL k4vsidx<>(SB), RODATA|NOPTR, $64\n")
	return b.String()
}

// kvtConsts loads the constants the VNNI tiles keep in registers: 0x0f
// bytes in Z14, the VPERMT2B indices in Z16 and Z17, the scales' VPERMW
// index in Z18, the mins' in Z19; kvtScales' byte indices in Y23 and Y24,
// shift counts in Y29, byte masks in K1 and K2.
const kvtConsts = `VBROADCASTI64X4 t8mask0f<>(SB), Z14
VMOVDQU64 k4vperm<>(SB), Z16
VMOVDQU64 k4vperm<>+64(SB), Z17
` + kvtScaleConsts

// kvtScaleConsts is the part of kvtConsts that the scales' unpacking
// (kvtScales) and spreading (Z18, Z19) read.
const kvtScaleConsts = `VMOVDQU64 k4vsidx<>(SB), Z18
VMOVDQU64 k4vmidx<>(SB), Z19
VMOVDQU64 k4vsca<>(SB), Y23
VMOVDQU64 k4vscb<>(SB), Y24
VMOVDQU64 k4vscn<>(SB), Y29
MOVL $0x55555555, AX
KMOVD AX, K1
MOVL $0x55005500, AX
KMOVD AX, K2`

// k4vScaleData returns kvtScales' constants: per word k of the result
// (sc0-7 then m0-7), the byte of the 12 scale bytes q whose bits it takes
// (k4vsca: q[k] or q[k+4] for the first four scales and mins, q[j+4] for
// j = k or k-8 ≥ 4), the shift right of that byte (k4vscn: 4 for the high
// nibbles of mins 4-7), the byte whose top two bits give bits 4-5 of
// scales and mins 4-7 (k4vscb: q[j-4], q[j]) and the mask of the first
// byte's bits (k4vscm: 0x3f or 0x0f); k4vmidx, the VPERMW index that
// spreads the mins as [m0-3 m0-3 | m4-7 m4-7] in each 256-bit half.
func k4vScaleData() string {
	var b strings.Builder
	for k := 0; k < 16; k++ {
		j := k % 8
		src, hi, cnt, mask := j, 0, 0, 0x3f
		switch {
		case k < 4:
		case k < 8:
			src, hi, mask = j+4, j-4, 0x0f
		case k < 12:
			src = j + 4
		default:
			src, hi, cnt, mask = j+4, j, 4, 0x0f
		}
		fmt.Fprintf(&b, "DATA k4vsca<>+%d(SB)/2, $%d\n", 2*k, src)
		fmt.Fprintf(&b, "DATA k4vscb<>+%d(SB)/2, $%d\n", 2*k, hi)
		fmt.Fprintf(&b, "DATA k4vscn<>+%d(SB)/2, $%d\n", 2*k, cnt)
		fmt.Fprintf(&b, "DATA k4vscm<>+%d(SB)/2, $%d\n", 2*k, mask)
	}
	for _, n := range []string{"k4vsca", "k4vscb", "k4vscn", "k4vscm"} {
		fmt.Fprintf(&b, "GLOBL %s<>(SB), RODATA|NOPTR, $32\n", n)
	}
	for n := 0; n < 32; n++ {
		fmt.Fprintf(&b, "DATA k4vmidx<>+%d(SB)/2, $%d\n", 2*n, 8+4*((n%16)/8)+n%4)
	}
	b.WriteString("GLOBL k4vmidx<>(SB), RODATA|NOPTR, $64\n")
	return b.String()
}

// kvtDecode writes the head of a VNNI tile's super-block (SI): the scales
// as words in VPACKSSDW's lane order in Z15, the mins as
// [m0-3 m0-3 | m4-7 m4-7] in both halves of Z12 (KSCALES8's values, by
// kvtScales), d and dmin broadcast in Z13 and Z20, the quants as vectors
// 0-3 in Z8-Z11. Clobbers Y0-Y3.
func (a *asm) kvtDecode() {
	a.kvtHead()
	a.code(`
VMOVDQU64 16(SI), Z8
VMOVDQA64 Z8, Z10
VPERMT2B 80(SI), Z16, Z8
VPERMT2B 80(SI), Z17, Z10
VPSRLW $4, Z8, Z9
VPSRLW $4, Z10, Z11
VPANDD Z14, Z8, Z8
VPANDD Z14, Z9, Z9
VPANDD Z14, Z10, Z10
VPANDD Z14, Z11, Z11`)
}

// kvtHead writes the part of kvtDecode that Q4_K and Q5_K super-blocks
// share (their d, dmin and 12 scale bytes lie alike): the scales in Z15,
// the mins in Z12, d and dmin in Z13 and Z20. Clobbers Y0-Y3.
func (a *asm) kvtHead() {
	a.kvtScales()
	a.code(`
VPERMW Z1, Z18, Z15
VPERMW Z1, Z19, Z12
VCVTPH2PS (SI), X3
VBROADCASTSS X3, Z13
VMOVSHDUP X3, X3
VBROADCASTSS X3, Z20`)
}

// kvtScales unpacks the 12 scale bytes q of the Q4_K block at SI into 16
// words in Y1, the eight 6-bit scales then the eight mins (ggml's
// get_scale_min_k4): each word the byte k4vsca picks shifted right by
// k4vscn and masked by k4vscm, or'ed with bits 6-7 of the byte k4vscb
// picks (scales and mins 4-7 only, K2) moved to bits 4-5 — by two
// VPERMB, two shifts and one VPTERNLOGD (f = C ? A : B with the mask as
// C; B's other bits are 0 or masked off). Clobbers Y0, Y2.
func (a *asm) kvtScales() {
	a.code(`
VMOVDQU 4(SI), X0
VPERMB.Z Y0, Y23, K1, Y1
VPERMB.Z Y0, Y24, K2, Y2
VPSRLVW Y29, Y1, Y1
VPSRLW $2, Y2, Y2
VPTERNLOGD $0xe4, k4vscm<>(SB), Y2, Y1`)
}

// kvtGroup writes the products of a group of 8 activation rows (act(r,
// v): row r's 64-byte vector v) with the super-block in Z8-Z11 and their
// fold into the float accumulator acc (a Z register, or memory through
// Z6): 16 floats, the AVX2 tiles' two accumulators of rows 0-3 and 4-7
// side by side. Per row four VPDPBUSD; per two rows a VPACKSSDW and one
// VPMADDWD by the scales (Z15), which also adds each two lanes of a row;
// the lanes of each 4 rows summed into HADD4's layout; then kxtHalf's fold
// (VPMADDWD of the mins in Z12 with the 32-value sums at bp(0) and bp(64),
// VPHADDD's sums by shuffles, d·xd and dmin·xd from Z13, Z20 and the 16
// activation scales at xd, the two FMAs) for both halves at once. Every
// lane holds the AVX2 tiles' integer and goes through their float
// operations, so the results equal theirs bit for bit. Clobbers Z0-Z7,
// Z25-Z28.
func (a *asm) kvtGroup(act func(r, v int) string, bp func(o int) string, xd, acc string) {
	for r := 0; r < 8; r++ {
		a.l("\tVPXORD Z%d, Z%d, Z%d", r, r, r)
		for v := 0; v < 4; v++ {
			a.l("\tVPDPBUSD %s, Z%d, Z%d", act(r, v), 8+v, r)
		}
	}
	// rows in pairs packed as words, scaled and paired
	a.code(`
VPACKSSDW Z1, Z0, Z25
VPACKSSDW Z3, Z2, Z26
VPACKSSDW Z5, Z4, Z27
VPACKSSDW Z7, Z6, Z28
VPMADDWD Z15, Z25, Z25
VPMADDWD Z15, Z26, Z26
VPMADDWD Z15, Z27, Z27
VPMADDWD Z15, Z28, Z28`)
	a.kvtFold(bp, xd, acc)
}

// kvtFold writes the end of kvtGroup from the scaled pairs of rows in
// Z25-Z28 (rows 0-1 … 6-7, VPMADDWD's dwords of VPACKSSDW's words): the
// lanes of each 4 rows summed into HADD4's layout, the mins and the float
// fold into acc. Clobbers Z0-Z6.
func (a *asm) kvtFold(bp func(o int) string, xd, acc string) {
	dst := acc
	if strings.Contains(acc, "(") {
		dst = "Z6"
	}
	// per 4 rows [a b c d] per 128-bit lane; [rows 0-3 | rows 4-7] with
	// the lanes of each half added
	a.code(`
VSHUFPS $0x88, Z26, Z25, Z0
VSHUFPS $0xdd, Z26, Z25, Z1
VPADDD Z1, Z0, Z0
VSHUFPS $0x88, Z28, Z27, Z2
VSHUFPS $0xdd, Z28, Z27, Z3
VPADDD Z3, Z2, Z2
VSHUFI64X2 $0x44, Z2, Z0, Z4
VSHUFI64X2 $0xee, Z2, Z0, Z5
VPADDD Z5, Z4, Z0`)
	// the mins: kxtHalf's VPMADDWD and VPHADDD for both halves (Z12
	// holds the mins in both 256-bit halves)
	a.code(fmt.Sprintf(`
VCVTDQ2PS Z0, Z0
VPMADDWD %s, Z12, Z1
VPMADDWD %s, Z12, Z2
VSHUFI64X2 $0x44, Z2, Z1, Z3
VSHUFI64X2 $0xee, Z2, Z1, Z4
VSHUFPS $0x88, Z4, Z3, Z1
VSHUFPS $0xdd, Z4, Z3, Z2
VPADDD Z2, Z1, Z2
VCVTDQ2PS Z2, Z2`, bp(0), bp(64)))
	if dst == "Z6" {
		a.l("\tVMOVUPS %s, Z6", acc)
	}
	a.code(fmt.Sprintf(`
VMULPS %s, Z13, Z4
VMULPS %s, Z20, Z5
VFMADD231PS Z0, Z4, %s
VFNMADD231PS Z2, Z5, %s`, xd, xd, dst, dst))
	if dst == "Z6" {
		a.l("\tVMOVUPS Z6, %s", acc)
	}
}

// kvt writes dotQ4KTx8VNNI (groups 1) or dotQ4KTx16VNNI (groups 2):
// dotQ4KTx8RAVX2's and dotQ4KTx16RAVX2's loops and arguments (kxt) with
// the activations in actQ.kv's layout, kvtDecode and kvtGroup, the float
// accumulators of each group of 8 rows in Z21 and Z22.
func (a *asm) kvt(groups int) {
	a.kvtTile(groups, kvtQ4K)
}

// kvtWeights is what a VNNI tile of kvtTile needs to know of its weight
// type: the function's name stem, its labels' prefix, its register
// constants, the decode of a super-block at SI into kvtDecode's registers,
// the products of a group (kvtGroup's arguments and contract), the
// super-block's bytes and the weight prefetches ahead of SI at 16 rows.
type kvtWeights struct {
	stem, lbl string
	consts    string
	decode    func(a *asm)
	group     func(a *asm, act func(r, v int) string, bp func(o int) string, xd, acc string)
	sb        int
	prefetch  []int
	// nName, nLbl and nPrefetch are the ×N tile's (kvtnTile) name, labels'
	// prefix and weight prefetches ahead of SI.
	nName, nLbl string
	nPrefetch   []int
	// bpStep and bpScale are the bytes the bp argument advances per
	// super-block and the multiple of nb·64 bytes from one group's to the
	// next (0: Q4_K's 128 and 2, its 32-value sums).
	bpStep, bpScale int
}

// bpSteps returns kw's bpStep and bpScale, their defaults filled in.
func (kw kvtWeights) bpSteps() (step, scale int) {
	step, scale = kw.bpStep, kw.bpScale
	if step == 0 {
		step = 128
	}
	if scale == 0 {
		scale = 2
	}
	return step, scale
}

// tileGroups emits one super-block's products for groups (1 or 2) row
// groups of the ×16 tile on the decoded weights: group g's activations at
// DI (the second at DI+R14), its block sums at DX and scales at BX (the
// second's at R15 further), accumulated into Z21+g.
func (kw kvtWeights) tileGroups(a *asm, groups int) {
	_, bpScale := kw.bpSteps()
	for g := 0; g < groups; g++ {
		act := func(r, v int) string {
			o := r*256 + 64*v
			if g == 0 {
				return fmt.Sprintf("%d(DI)", o)
			}
			return fmt.Sprintf("%d(DI)(R14*1)", o)
		}
		grp := func(off int, base string, scale int) string {
			if g == 0 {
				return fmt.Sprintf("%d(%s)", off, base)
			}
			return fmt.Sprintf("%d(%s)(R15*%d)", off, base, scale)
		}
		kw.group(a, act, func(o int) string { return grp(o, "BX", bpScale) }, grp(0, "DX", 1), fmt.Sprintf("Z%d", 21+g))
	}
}

// kvtQ4K is the Q4_K repacked super-block of dotQ4KTx8VNNI and
// dotQ4KTx16VNNI.
var kvtQ4K = kvtWeights{
	stem: "dotQ4KTx%dVNNI", lbl: "q4kv%d", consts: kvtConsts,
	decode: (*asm).kvtDecode, group: (*asm).kvtGroup, sb: 144,
	prefetch: []int{1152, 1216, 1280},
	nName:    "dotQ4KTxNVNNI", nLbl: "q4kvn", nPrefetch: []int{576, 640, 704},
}

// kvtTile writes kvt's tile for the weights of kw.
func (a *asm) kvtTile(groups int, kw kvtWeights) {
	name := fmt.Sprintf(kw.stem, 8*groups)
	lbl := fmt.Sprintf(kw.lbl, 8*groups)
	a.l(``)
	a.l(`// func %s(w *byte, rb int, rows int, xt *int8, xd8 *float32, bp *int16, nb int, out *float32, os int)`, name)
	a.l(`TEXT ·%s(SB), NOSPLIT, $96-72`, name)
	a.code(kw.consts)
	a.code(`
MOVQ w+0(FP), R8
MOVQ rows+16(FP), R9
MOVQ out+56(FP), R10
MOVQ nb+48(FP), R15
MOVQ R15, R14
SHLQ $11, R14
SHLQ $6, R15`)
	a.l("%srow:", lbl)
	a.code(`
MOVQ R8, SI
MOVQ xt+24(FP), DI
MOVQ xd8+32(FP), DX
MOVQ bp+40(FP), BX
MOVQ nb+48(FP), CX`)
	for g := 0; g < groups; g++ {
		a.l("\tVPXORD Z%d, Z%d, Z%d", 21+g, 21+g, 21+g)
	}
	a.l("%sloop:", lbl)
	if groups == 2 {
		// the weight stream 8 super-blocks ahead (dotQ4KTx16RAVX2: 4): the
		// ×16 tile runs at 16-row decode, where the weights stream from
		// memory, and there 8 ahead was faster in both sessions that
		// measured it (BenchmarkK4V k2048/n16/mem, alternated: +5.7 %;
		// then −4.6…+5.8 %, median +3.7 %, load 16–25; in L2 −1…+7 % and
		// −2…+4 %); docs/BENCHMARKS.md, i17tiles
		for _, o := range kw.prefetch {
			a.l("\tPREFETCHT0 %d(SI)", o)
		}
	}
	kw.decode(a)
	bpStep, _ := kw.bpSteps()
	kw.tileGroups(a, groups)
	a.l("\tADDQ $%d, SI", kw.sb)
	a.code(fmt.Sprintf(`
ADDQ $2048, DI
ADDQ $64, DX
ADDQ $%d, BX
DECQ CX`, bpStep))
	a.l("\tJNZ %sloop", lbl)
	a.code(`
MOVQ os+64(FP), DX
SHLQ $2, DX
MOVQ R10, AX`)
	for s := 0; s < 2*groups; s++ {
		if s%2 == 0 {
			a.l("\tVMOVAPS Y%d, Y8", 21+s/2)
		} else {
			a.l("\tVEXTRACTF64X4 $1, Z%d, Y8", 21+s/2)
		}
		a.code(`
VEXTRACTF128 $1, Y8, X9
VADDPS X9, X8, X8`)
		for i := 0; i < 4; i++ {
			if i == 0 {
				a.l("\tVMOVSS X8, (AX)")
			} else {
				a.l("\tVEXTRACTPS $%d, X8, (AX)", i)
			}
			if s < 2*groups-1 || i < 3 {
				a.l("\tADDQ DX, AX")
			}
		}
	}
	a.code(`
ADDQ $4, R10
ADDQ rb+8(FP), R8
DECQ R9`)
	a.l("\tJNZ %srow", lbl)
	a.code(`
VZEROUPPER
RET`)
}

// kvtn writes dotQ4KTxNVNNI: dotQ4KTxNRAVX2 (kxtn: the same loops,
// arguments and accumulators in memory) with kvtDecode and kvtGroup.
func (a *asm) kvtn() {
	a.kvtnTile(kvtQ4K)
}

// kvtnTile writes kvtn's tile for the weights of kw.
func (a *asm) kvtnTile(kw kvtWeights) {
	lbl := kw.nLbl
	a.l(``)
	a.l(`// func %s(w *byte, rb int, rows int, xt *int8, xd8 *float32, bp *int16, nb int, out *float32, os int, groups int, acc *float32, gs int, ss int)`, kw.nName)
	a.l(`TEXT ·%s(SB), NOSPLIT, $96-104`, kw.nName)
	a.code(kw.consts)
	a.code(`
MOVQ nb+48(FP), R15
MOVQ gs+88(FP), R14
SHLQ $6, R15
MOVQ acc+80(FP), R10
MOVQ rows+16(FP), R9
IMULQ groups+72(FP), R9`)
	a.ktnHead(lbl, "bp", 40, 48, 80)
	for _, o := range kw.nPrefetch {
		a.l("\tPREFETCHT0 %d(SI)", o)
	}
	kw.decode(a)
	a.code(`
MOVQ DI, R11
MOVQ DX, R12
MOVQ BX, R13
MOVQ groups+72(FP), R9`)
	a.l("%sgroup:", lbl)
	act := func(r, v int) string { return fmt.Sprintf("%d(R11)", r*256+64*v) }
	kw.group(a, act, func(o int) string { return fmt.Sprintf("%d(R13)", o) }, "(R12)", "(R10)")
	bpStep, bpScale := kw.bpSteps()
	a.code(fmt.Sprintf(`
ADDQ R14, R11
ADDQ R15, R12
LEAQ (R13)(R15*%d), R13
ADDQ $64, R10
DECQ R9
JNZ %sgroup
ADDQ rb+8(FP), SI
DECQ 72(SP)
JNZ %srow
ADDQ $%d, R8
ADDQ ss+96(FP), DI
ADDQ $64, DX
ADDQ $%d, BX
DECQ CX
JNZ %sloop`, bpScale, lbl, lbl, kw.sb, bpStep, lbl))
	a.ktnStore(lbl, 56, 64, 72, 80)
}

// k4vTransposeData returns kvTranspose's VPERMI2W indices (k4vtj, two
// of 64 bytes): for the output vectors (v, v+1), v = 0 and 2, word k < 16
// of the result is word k of vector v's first half and word 16+k word k
// of vector v+1's, both from the pair of source vectors that hold
// sub-blocks 0-3 (and, with the same index, 4-7): word 2i+pw (i < 8, so
// w = i%4, h = i/4) of vector v is source word 16w+8h+4(v/2)+2pw+v%2.
func k4vTransposeData() string {
	var b strings.Builder
	for p := 0; p < 2; p++ {
		for k := 0; k < 32; k++ {
			v, kk := 2*p+k/16, k%16
			i, pw := kk/2, kk%2
			w, h := i%4, i/4
			fmt.Fprintf(&b, "DATA k4vtj<>+%d(SB)/2, $%d\n", 64*p+2*k, 16*w+8*h+4*(v/2)+2*pw+v%2)
		}
	}
	b.WriteString("GLOBL k4vtj<>(SB), RODATA|NOPTR, $128\n")
	return b.String()
}

// kvTranspose writes transposeKVAVX512: one activation row's nb
// super-blocks (256 bytes each, consecutive at q) into actQ.kv's order
// (kernels/cpu k4vActWords) at dst, super-blocks ss bytes apart. Per
// super-block: two VPERMI2W per pair of output vectors (sub-blocks 0-3
// from source vectors 0 and 1, 4-7 from 2 and 3, by the same index),
// whose halves are then joined.
func (a *asm) kvTranspose() {
	a.l(``)
	a.l(`// func transposeKVAVX512(q *int8, dst *int8, nb int, ss int)`)
	a.l(`TEXT ·transposeKVAVX512(SB), NOSPLIT, $0-32`)
	a.code(`
MOVQ q+0(FP), SI
MOVQ dst+8(FP), DI
MOVQ nb+16(FP), CX
MOVQ ss+24(FP), DX
VMOVDQU64 k4vtj<>(SB), Z16
VMOVDQU64 k4vtj<>+64(SB), Z17
kvtrloop:
VMOVDQU64 (SI), Z0
VMOVDQU64 128(SI), Z2`)
	for p := 0; p < 2; p++ {
		a.code(fmt.Sprintf(`
VMOVDQA64 Z%d, Z4
VPERMI2W 64(SI), Z0, Z4
VMOVDQA64 Z%d, Z5
VPERMI2W 192(SI), Z2, Z5
VINSERTI64X4 $1, Y5, Z4, Z6
VSHUFI64X2 $0xee, Z5, Z4, Z7
VMOVDQU64 Z6, %d(DI)
VMOVDQU64 Z7, %d(DI)`, 16+p, 16+p, 128*p, 128*p+64))
	}
	a.code(`
ADDQ $256, SI
ADDQ DX, DI
DECQ CX
JNZ kvtrloop
VZEROUPPER
RET`)
}

// k4vDecls returns k4v_amd64.go, the Go declarations of k4v_amd64.s.
func k4vDecls() string {
	return `//go:build amd64 && !purego

package cpu

// Code generated by asmgen; DO NOT EDIT.

// dotQ4KTx8VNNI, dotQ4KTx16VNNI and dotQ4KTxNVNNI are dotQ4KTx8RAVX2,
// dotQ4KTx16RAVX2 and dotQ4KTxNRAVX2 (repacked weights) with AVX512_VNNI
// and AVX512_VBMI, on the activations in actQ.kv's layout (transposeKV)
// instead of actQ.kt's; each result equals theirs bit for bit.
//
//go:noescape
func dotQ4KTx8VNNI(w *byte, rb int, rows int, xt *int8, xd8 *float32, bp *int16, nb int, out *float32, os int)

//go:noescape
func dotQ4KTx16VNNI(w *byte, rb int, rows int, xt *int8, xd8 *float32, bp *int16, nb int, out *float32, os int)

//go:noescape
func dotQ4KTxNVNNI(w *byte, rb int, rows int, xt *int8, xd8 *float32, bp *int16, nb int, out *float32, os int, groups int, acc *float32, gs int, ss int)

// transposeKVAVX512 writes one activation row's nb super-blocks (q) in
// actQ.kv's order (k4vActWords) to dst, super-blocks ss bytes apart.
//
//go:noescape
func transposeKVAVX512(q *int8, dst *int8, nb int, ss int)
`
}
