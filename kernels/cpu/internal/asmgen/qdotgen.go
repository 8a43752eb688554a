package asmgen

import (
	"fmt"
	"strings"
)

// qdot writes qdotgen_amd64.s: the AVX2 kernels on stored weight encodings
// (see package cpu's qmat.go). Batch-1 row loops (one activation row
// against a range of consecutive weight rows; one row is a call with rows
// 1) and the ×4 tiles (one weight row against four activation rows) each
// share one skeleton here; only their block bodies differ.
func qdot() string {
	var a asm
	a.header()
	a.lines(`
// AVX2 kernels on weights in their stored encodings (see qmat.go for the
// numeric contract): batch-1 row loops, each computing rows consecutive
// weight rows against one activation row into out[0:rows], and the ×4
// tiles of one weight row against four activation rows. Callers handle
// tails in Go.`)
	for _, part := range []string{macrosHalf, q4_0, macrosK, kscalesV, macrosQ6, macrosQ8} {
		a.l(``)
		a.l("%s", part)
	}
	for _, k := range rowKernels() {
		a.l(``)
		a.rows(k)
	}
	for _, part := range []string{macrosX4, macrosQ6X4, macrosQ5X4, macrosQ8X4} {
		a.l(``)
		a.l("%s", part)
	}
	for _, k := range x4Kernels() {
		a.l(``)
		a.x4(k)
	}
	return a.b.String()
}

// kscalesV is the vector unpacking of a Q4_K/Q5_K block's 12 scale bytes:
// 14 instructions where a general-register version takes 30 (the Q4_K row
// loop on weights in L2: 15.4–15.9 → 16.8–17.1 GB per CPU-second).
const kscalesV = `DATA kmask3f<>+0(SB)/8, $0x3f3f3f3f3f3f3f3f
DATA kmask3f<>+8(SB)/8, $0x3f3f3f3f3f3f3f3f
GLOBL kmask3f<>(SB), RODATA|NOPTR, $16
DATA kmask30<>+0(SB)/8, $0x3030303030303030
DATA kmask30<>+8(SB)/8, $0x3030303030303030
GLOBL kmask30<>(SB), RODATA|NOPTR, $16

// KSCALESV unpacks the 12 scale bytes b0..b11 of a Q4_K/Q5_K block at
// 4(SI): scales 0-3 and mins 0-3 are the low 6 bits of b0..b7; scales and
// mins 4-7 are the nibbles of b8..b11 with the top 2 bits of b0..b3 and
// b4..b7 above them. The eight scales are stored as words at 0(SP), the
// eight mins left as words in X9. Needs 0x0f bytes in X14; clobbers X8,
// X10-X12.
#define KSCALESV \
	VMOVDQU 4(SI), X8; \
	VPAND kmask3f<>(SB), X8, X9; \
	VPSRLW $2, X8, X10; \
	VPAND kmask30<>(SB), X10, X10; \
	VPAND X14, X8, X11; \
	VPSRLW $4, X8, X12; \
	VPAND X14, X12, X12; \
	VPUNPCKHDQ X12, X11, X11; \
	VPOR X11, X10, X10; \
	VPUNPCKLDQ X10, X9, X9; \
	VPMOVZXBW X9, X10; \
	VMOVDQU X10, 0(SP); \
	VPSRLDQ $8, X9, X9; \
	VPMOVZXBW X9, X9`

// rowKernel describes one batch-1 row loop.
type rowKernel struct {
	name string
	doc  string
	args []string // Go parameters after w, before rows and out
	// frame is the local frame size (32 where the scales are spilled).
	frame int
	// consts sets up constants once per call.
	consts string
	// zero lists the accumulators cleared per row.
	zero []string
	// body is one iteration of the per-row loop over blocks, ending in a
	// conditional jump back to the label {loop}; {done} is a free label.
	body string
	// reduce leaves the row's result in X0.
	reduce string
	// pf is the weight bytes one loop iteration reads, prefetched
	// rowAhead bytes ahead (0: none). It pays for the k-quants (a 1B
	// Q4_K_M decode step's products: 15.4–17.3 → 18.6–19.2 tokens per
	// CPU-second, docs/bench/real-shapes.md); F16/BF16 and Q8_0 were not
	// measured with it.
	pf int
}

// rowAhead is how far ahead (bytes) the row loops prefetch weights.
const rowAhead = 1024

// argRegs maps row-loop parameters to the registers the bodies expect.
var argRegs = map[string]string{"x": "DI", "xq": "DI", "xd": "DX", "bs": "BX", "nb": "CX", "n": "CX"}

// rows writes one row loop: for each of rows weight rows, reload the
// activation pointers, clear the accumulators, run the block loop, reduce
// and store, then go on to the next weight row (SI runs on through them).
func (a *asm) rows(k rowKernel) {
	params := append([]string{"w *byte"}, k.args...)
	params = append(params, "rows int", "out *float32")
	a.l("// func %s(%s)", k.name, strings.Join(params, ", "))
	if k.doc != "" {
		a.lines(k.doc)
	}
	a.l("TEXT ·%s(SB), NOSPLIT, $%d-%d", k.name, k.frame, 8*len(params))
	lbl := strings.ToLower(strings.TrimSuffix(k.name, "AVX2"))
	rowsOff, outOff := 8*(len(params)-2), 8*(len(params)-1)
	// the k-quant loops use every general register but R9; they keep the
	// row count in its argument slot
	rowsReg := "R9"
	if k.frame > 0 {
		rowsReg = fmt.Sprintf("rows+%d(FP)", rowsOff)
	}
	a.l("\tMOVQ w+0(FP), SI")
	if k.frame == 0 {
		a.l("\tMOVQ rows+%d(FP), R9", rowsOff)
	}
	a.l("\tMOVQ out+%d(FP), R15", outOff)
	a.code(k.consts)
	a.l("%srows:", lbl)
	for i, p := range k.args {
		name := strings.Fields(p)[0]
		a.l("\tMOVQ %s+%d(FP), %s", name, 8*(i+1), argRegs[name])
	}
	for _, r := range k.zero {
		a.l("\tVXORPS %s, %s, %s", r, r, r)
	}
	a.l("%sloop:", lbl)
	if k.pf > 0 {
		// weights stream from memory: ask for the lines rowAhead bytes on
		a.l("\tPREFETCHT0 %d(SI)", rowAhead)
		if k.pf > 64 {
			a.l("\tPREFETCHT0 %d(SI)", rowAhead+64)
		}
		if k.pf > 128 {
			a.l("\tPREFETCHT0 %d(SI)", rowAhead+128)
		}
	}
	body := strings.NewReplacer("{loop}", lbl+"loop", "{done}", lbl+"done").Replace(k.body)
	a.code(body)
	a.code(k.reduce)
	a.code(fmt.Sprintf(`
MOVSS X0, (R15)
ADDQ $4, R15
DECQ %s
JNZ %srows
VZEROUPPER
RET`, rowsReg, lbl))
}

// broadcast returns the code that fills ymm reg with the 32-bit constant v.
func broadcast(v uint32, reg int) string {
	return fmt.Sprintf("MOVL $0x%08x, AX\nVMOVD AX, X%d\nVPBROADCASTD X%d, Y%d", v, reg, reg, reg)
}

// kTail ends a k-quant block: the block's integer sum (Y1) times d·xd (Y6)
// into Y0, pointers on to the next block.
func kTail(blockBytes int) string {
	return fmt.Sprintf(`
VCVTDQ2PS Y1, Y1
VFMADD231PS Y1, Y6, Y0
ADDQ $%d, SI
ADDQ $256, DI
ADDQ $4, DX
ADDQ $32, BX
DECQ CX
JNZ {loop}`, blockBytes)
}

// q5bits ors bit 4 of (qh in src shifted left by s; right for negative
// s), masked with Y15, into dst, through tmp.
func q5bits(src string, s int, tmp, mask, dst string) string {
	var b strings.Builder
	switch {
	case s > 0:
		fmt.Fprintf(&b, "VPSLLW $%d, %s, %s\n", s, src, tmp)
	case s < 0:
		fmt.Fprintf(&b, "VPSRLW $%d, %s, %s\n", -s, src, tmp)
	default:
		fmt.Fprintf(&b, "VMOVDQU %s, %s\n", src, tmp)
	}
	fmt.Fprintf(&b, "VPAND %s, %s, %s\nVPOR %s, %s, %s\n", mask, tmp, tmp, tmp, dst, dst)
	return b.String()
}

// halfRows is the body of the F16 (half) or BF16 row loop: 32 weights
// widened to float32 in Y4–Y7 per iteration, four FMA accumulators.
func halfRows(bf16 bool) string {
	var b strings.Builder
	for i := 0; i < 4; i++ {
		if bf16 {
			fmt.Fprintf(&b, "VPMOVZXWD %s(SI), Y%d\n", off(16*i), 4+i)
		} else {
			fmt.Fprintf(&b, "VCVTPH2PS %s(SI), Y%d\n", off(16*i), 4+i)
		}
	}
	if bf16 {
		for i := 0; i < 4; i++ {
			fmt.Fprintf(&b, "VPSLLD $16, Y%d, Y%d\n", 4+i, 4+i)
		}
	}
	for i := 0; i < 4; i++ {
		fmt.Fprintf(&b, "VFMADD231PS %s(DI), Y%d, Y%d\n", off(32*i), 4+i, i)
	}
	b.WriteString("ADDQ $64, SI\nADDQ $128, DI\nSUBQ $32, CX\nJNZ {loop}")
	return b.String()
}

func rowKernels() []rowKernel {
	kq := []string{"xq *int8", "xd *float32", "bs *int16", "nb int"}
	halfReduce := "VADDPS Y1, Y0, Y0\nVADDPS Y3, Y2, Y2\nVADDPS Y2, Y0, Y0\nHSUM8"
	minsReduce := "HSUM8\nVHADDPS X3, X3, X3\nVHADDPS X3, X3, X3\nVSUBSS X3, X0, X0"

	var q4 strings.Builder
	q4.WriteString("KSCALESV\nKHEAD\nVPXOR Y1, Y1, Y1\n")
	for g := 0; g < 4; g++ {
		fmt.Fprintf(&q4, "Q4NIB(%d)\nKGROUP(%d)\n", 16+32*g, g)
	}
	q4.WriteString(kTail(144))

	var q5 strings.Builder
	q5.WriteString("KSCALESV\nKHEAD\nVMOVDQU 16(SI), Y2\nVPXOR Y1, Y1, Y1\n")
	for g := 0; g < 4; g++ {
		// bit 2g of each qh byte to bit 4 for the low nibbles, 2g+1 for the high
		fmt.Fprintf(&q5, "Q4NIB(%d)\n", 48+32*g)
		q5.WriteString(q5bits("Y2", 4-2*g, "Y4", "Y15", "Y10"))
		q5.WriteString(q5bits("Y2", 3-2*g, "Y5", "Y15", "Y11"))
		fmt.Fprintf(&q5, "KGROUP(%d)\n", g)
	}
	q5.WriteString(kTail(176))

	return []rowKernel{
		{name: "dotF16RowsAVX2", args: []string{"x *float32", "n int"},
			doc:  "// n (the row length) is a multiple of 32; rows are 2n bytes apart.",
			zero: []string{"Y0", "Y1", "Y2", "Y3"}, body: halfRows(false), reduce: halfReduce},
		{name: "dotBF16RowsAVX2", args: []string{"x *float32", "n int"},
			doc:  "// n (the row length) is a multiple of 32; rows are 2n bytes apart.",
			zero: []string{"Y0", "Y1", "Y2", "Y3"}, body: halfRows(true), reduce: halfReduce},
		{name: "dotQ8_0RowsAVX2", args: []string{"xq *int8", "xd *float32", "nb int"},
			doc:    "// Per block: Σ w·x as |w| (unsigned) × x·sign(w) (signed) with VPMADDUBSW,\n// pairs summed by VPMADDWD with ones, then scaled by d_w·d_x in float.",
			consts: "VPCMPEQW Y15, Y15, Y15\nVPSRLW $15, Y15, Y15",
			zero:   []string{"Y0", "Y1"},
			body:   "Q8BLK(Y0)\nDECQ CX\nJZ {done}\nQ8BLK(Y1)\nDECQ CX\nJNZ {loop}\n{done}:",
			reduce: "VADDPS Y1, Y0, Y0\nHSUM8"},
		{name: "dotQ4KRowsAVX2", args: kq, frame: 32, consts: broadcast(0x0f0f0f0f, 14),
			zero: []string{"Y0", "X3"}, body: q4.String(), reduce: minsReduce, pf: 144},
		{name: "dotQ5KRowsAVX2", args: kq, frame: 32,
			consts: broadcast(0x0f0f0f0f, 14) + "\n" + broadcast(0x10101010, 15),
			zero:   []string{"Y0", "X3"}, body: q5.String(), reduce: minsReduce, pf: 176},
		{name: "dotQ6KRowsAVX2", args: kq, frame: 32,
			consts: broadcast(0x0f0f0f0f, 14) + "\n" + broadcast(0x30303030, 15) + "\nVMOVDQU q6shuf<>(SB), Y12",
			zero:   []string{"Y0"},
			body: `SCALE(208(SI), (DX), X6, Y6)
VPMOVSXBW 192(SI), Y8
VMOVDQU Y8, 0(SP)
VPMADDWD (BX), Y8, Y9
VPSLLD $5, Y9, Y9
VPXOR Y1, Y1, Y1
VPSUBD Y9, Y1, Y1
Q6HALF(0, 128, 0, 0)
Q6HALF(64, 160, 128, 16)` + kTail(210),
			reduce: "HSUM8", pf: 210},
	}
}

// x4Kernel describes one ×4 tile: one weight row against four activation
// rows (xs bytes, xds scales and bss sums apart), accumulators Y0–Y3.
type x4Kernel struct {
	name       string
	sums       bool // takes the k-quants' 16-value sums (bs, bss)
	frame      int
	blockBytes int // weight bytes per block
	actBytes   int // activation bytes per block
	// xd3, bs3: R8 = 3·xds bytes, R9 = 3·bss bytes
	xd3, bs3 bool
	consts   string
	body     string
}

// x4 writes one ×4 tile: the argument set-up, the block loop around the
// body and the reduction of Y0–Y3 into out[0:4].
func (a *asm) x4(k x4Kernel) {
	params := []string{"w *byte", "xq *int8", "xs int", "xd *float32", "xds int"}
	if k.sums {
		params = append(params, "bs *int16", "bss int")
	}
	params = append(params, "nb int", "out *[4]float32")
	a.l("// func %s(%s)", k.name, strings.Join(params, ", "))
	a.l("TEXT ·%s(SB), NOSPLIT, $%d-%d", k.name, k.frame, 8*len(params))
	lbl := strings.ToLower(strings.TrimSuffix(k.name, "AVX2")) + "loop"
	a.code(`
MOVQ w+0(FP), SI
MOVQ xq+8(FP), DI
MOVQ xs+16(FP), R12
LEAQ (R12)(R12*2), R13
MOVQ xd+24(FP), DX
MOVQ xds+32(FP), R14
SHLQ $2, R14`)
	if k.xd3 {
		a.l("\tLEAQ (R14)(R14*2), R8")
	}
	if k.sums {
		a.code(`
MOVQ bs+40(FP), BX
MOVQ bss+48(FP), R15
SHLQ $1, R15`)
		if k.bs3 {
			a.l("\tLEAQ (R15)(R15*2), R9")
		}
	}
	a.l("\tMOVQ nb+%d(FP), CX", 8*(len(params)-2))
	a.code(k.consts)
	for r := 0; r < 4; r++ {
		a.l("\tVXORPS Y%d, Y%d, Y%d", r, r, r)
	}
	a.l("%s:", lbl)
	a.code(k.body)
	a.l("\tADDQ $%d, SI", k.blockBytes)
	a.l("\tADDQ $%d, DI", k.actBytes)
	a.l("\tADDQ $4, DX")
	if k.sums {
		a.l("\tADDQ $32, BX")
	}
	a.code(fmt.Sprintf(`
DECQ CX
JNZ %s
MOVQ out+%d(FP), DX`, lbl, 8*(len(params)-1)))
	a.hsum4Store()
	a.code(`
VZEROUPPER
RET`)
}

// x4KTail folds a Q4_K/Q5_K block's four integer sums (Y4–Y7) into the
// rows' float accumulators.
const x4KTail = `MOVL (SI), AX
VMOVD AX, X8
VCVTPH2PS X8, X8
X4ROW((DX), (BX), 16(BX), Y4, Y0)
X4ROW((DX)(R14*1), (BX)(R15*1), 16(BX)(R15*1), Y5, Y1)
X4ROW((DX)(R14*2), (BX)(R15*2), 16(BX)(R15*2), Y6, Y2)
LEAQ (R14)(R14*2), AX
LEAQ (R15)(R15*2), R8
X4ROW((DX)(AX*1), (BX)(R8*1), 16(BX)(R8*1), Y7, Y3)`

func x4Kernels() []x4Kernel {
	head := "KSCALESV\nVPXOR Y4, Y4, Y4\nVPXOR Y5, Y5, Y5\nVPXOR Y6, Y6, Y6\nVPXOR Y7, Y7, Y7\n"
	var q4, q5 strings.Builder
	q4.WriteString(head)
	q5.WriteString(head + "VMOVDQU 16(SI), Y8\n")
	for g := 0; g < 4; g++ {
		fmt.Fprintf(&q4, "Q4NIB(%d)\nX4GROUP(%d)\n", 16+32*g, g)
		fmt.Fprintf(&q5, "Q4NIB(%d)\n", 48+32*g)
		q5.WriteString(q5bits("Y8", 4-2*g, "Y15", "q5mask10<>(SB)", "Y10"))
		q5.WriteString(q5bits("Y8", 3-2*g, "Y15", "q5mask10<>(SB)", "Y11"))
		fmt.Fprintf(&q5, "X4GROUP(%d)\n", g)
	}
	q4.WriteString(x4KTail)
	q5.WriteString(x4KTail)
	nib := broadcast(0x0f0f0f0f, 14)
	return []x4Kernel{
		{name: "dotQ4Kx4AVX2", sums: true, frame: 32, blockBytes: 144, actBytes: 256, consts: nib, body: q4.String()},
		{name: "dotQ6Kx4AVX2", sums: true, frame: 32, blockBytes: 210, actBytes: 256, xd3: true, bs3: true, consts: nib, body: x4Q6K},
		{name: "dotQ5Kx4AVX2", sums: true, frame: 32, blockBytes: 176, actBytes: 256, consts: nib, body: q5.String()},
		{name: "dotQ8_0x4AVX2", blockBytes: 34, actBytes: 32, xd3: true,
			consts: "VPCMPEQW Y15, Y15, Y15\nVPSRLW $15, Y15, Y15", body: x4Q8},
	}
}
