package asmgen

import (
	"fmt"
	"strings"
)

// q6rows writes q6rows_amd64.s: the batch-1 Q6_K row loop with its
// sub-block scales kept in registers, and a copy of the Q5_K row loop that
// prefetches farther ahead. The Q6_K loop of qdotgen_amd64.s spills a
// block's 16 scales to the frame and, for every 32 values, reloads two of
// them with a broadcast and spreads them over the two lanes with a shuffle;
// here each half-block's eight scales are spread over both lanes once
// (VPERMQ) and every 32 values take their pair with one VPSHUFB against a
// constant. The −32 offset of the 6-bit values stays folded into one
// VPMADDWD of the scales with the activation's 16-value sums, now
// subtracted once at the end of the block; the block's first product
// writes the integer accumulator instead of adding to a cleared one, and
// d·xd is formed in a vector register. 102 → 92 instructions per block
// (256 weights), and weights are prefetched q6Ahead bytes ahead. On one
// thread: +3–4 % weight bytes per CPU-second in L2 and +7–15 % streamed
// from memory, where it reaches 13–15 GB per CPU-second against
// scripts/membw.c's 15.4–16.9 at the same load (docs/bench/kquant-decode.md).
//
// The integer block sums are exact and d·xd, the conversion and the fused
// multiply-add are the same operations in the same order as the spilling
// loop, so each result equals dotQ6KRowsAVX2's bit for bit; the Q5_K copy
// runs dotQ5KRowsAVX2's body unchanged.
//
// Tried and dropped (no gain in a paired run): the four VPSHUFB controls
// held in registers (+2–4 % in L2, none streaming); for Q5_K, scales stored
// as doubled words and broadcast by VPBROADCASTD with the first group
// starting the sum (−2–3 % in L2).
func q6rows() string {
	var a asm
	a.header()
	a.lines(`
// Batch-1 Q6_K row loop with the sub-block scales in registers, and the
// Q5_K row loop of qdotgen_amd64.s prefetching q6Ahead bytes ahead (see
// q6rows.go in package asmgen and the numeric contract in qmat.go): rows
// consecutive weight rows of nb blocks against one Q8_K activation row into
// out[0:rows].`)
	a.l("%s", q6rowsConsts())
	for _, part := range []string{macrosK, kscalesV} {
		a.l(``)
		a.l("%s", part)
	}
	for _, k := range rowKernels() {
		if k.name == "dotQ5KRowsAVX2" {
			k.name, k.body, k.pf, k.reduce = "dotQ5KRowsPfAVX2", q6pf(q6Ahead, 3)+k.body, 0, strings.ReplaceAll(k.reduce, "HSUM8", "HSUM8R")
			a.l(``)
			a.rows(k)
		}
	}
	a.rows(rowKernel{name: "dotQ6KRowsRegAVX2",
		args:   []string{"xq *int8", "xd *float32", "bs *int16", "nb int"},
		consts: broadcast(0x0f0f0f0f, 14) + "\n" + broadcast(0x30303030, 15),
		zero:   []string{"Y0"},
		body:   q6pf(q6Ahead, 3) + q6regBody(),
		reduce: "HSUM8R"})
	return a.b.String()
}

// q6rowsConsts are the four VPSHUFB controls (one per 32-value quarter q
// of a half-block: word 2q of each lane in the low lane, word 2q+1 in the
// high lane) and the horizontal sum.
func q6rowsConsts() string {
	var b strings.Builder
	b.WriteString("\n")
	for q := 0; q < 4; q++ {
		for half := 0; half < 2; half++ {
			lo := byte(4*q + 2*half)
			var v uint64
			for i := 0; i < 4; i++ {
				v |= uint64(lo)<<(16*i) | uint64(lo+1)<<(16*i+8)
			}
			for j := 0; j < 2; j++ {
				fmt.Fprintf(&b, "DATA q6rsc<>+%d(SB)/8, $0x%016x\n", 32*q+16*half+8*j, v)
			}
		}
	}
	b.WriteString(`GLOBL q6rsc<>(SB), RODATA|NOPTR, $128

// HSUM8R reduces the 8 floats of Y0 into X0's low lane.
#define HSUM8R \
	VEXTRACTF128 $1, Y0, X1; \
	VADDPS X1, X0, X0; \
	VHADDPS X0, X0, X0; \
	VHADDPS X0, X0, X0`)
	return b.String()
}

// q6Ahead is how far ahead (bytes) the Q6_K loop prefetches its weights:
// twice the other row loops' rowAhead. Streaming 256 MiB of Q6_K rows on
// one thread it read 11.3–12.8 GB per CPU-second against 10.4–11.3 at
// 1024 bytes (3 runs; 512, 1536, 3072, 4096 and 6144 bytes and a fourth
// line per block were no better; no software prefetch 9.9–10.2).
const q6Ahead = 2048

// q6pf prefetches n cache lines ahead bytes beyond SI (a block is 210
// bytes: three lines per block keep pace with the stream).
func q6pf(ahead, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "PREFETCHT0 %d(SI)\n", ahead+64*i)
	}
	return b.String()
}

// q6regBody is one block of the loop. Registers: Y0 the float accumulator,
// Y1 the block's integer sum, Y6 d·xd, Y7/Y8 the scales of half 0/1 (words
// s0..s7 in both lanes), Y9 32·Σ sc·(Σx), Y14 0x0f bytes, Y15 0x30 bytes.
func q6regBody() string { return q6regBodyV(false) }

// q6regBodyV is q6regBody, or with vnni its AVX-512 VNNI form (256-bit
// EVEX): each quarter's fifth and sixth bits merged by one VPTERNLOGD
// (VPAND and VPOR) and its scaled products added by one VPDPWSSD (VPMADDWD
// and VPADDD). Both compute the same integers in the same lanes.
func q6regBodyV(vnni bool) string {
	var b strings.Builder
	b.WriteString(`VPBROADCASTW 208(SI), X6
VCVTPH2PS X6, Y6
VBROADCASTSS (DX), Y5
VMULPS Y5, Y6, Y6
VPMOVSXBW 192(SI), Y8
VPMADDWD (BX), Y8, Y9
VPSLLD $5, Y9, Y9
VPERMQ $0x44, Y8, Y7
VPERMQ $0xee, Y8, Y8
`)
	for h := 0; h < 2; h++ {
		ql, qh := 64*h, 128+32*h
		fmt.Fprintf(&b, "VMOVDQU %s(SI), Y10\nVMOVDQU %d(SI), Y11\nVMOVDQU %d(SI), Y2\n", off(ql), ql+32, qh)
		sc := []string{"Y7", "Y8"}[h]
		for q := 0; q < 4; q++ {
			// the 6-bit values of quarter q into Y4: low (q<2) or high
			// nibbles of ql (Y10 for even q, Y11 for odd), bits 2q, 2q+1
			// of qh at bits 4, 5
			src := []string{"Y10", "Y11"}[q%2]
			if q < 2 {
				fmt.Fprintf(&b, "VPAND Y14, %s, Y4\n", src)
			} else {
				fmt.Fprintf(&b, "VPSRLW $4, %s, Y4\nVPAND Y14, Y4, Y4\n", src)
			}
			hb := "Y5"
			switch s := 4 - 2*q; {
			case s > 0:
				fmt.Fprintf(&b, "VPSLLW $%d, Y2, Y5\n", s)
			case s < 0:
				fmt.Fprintf(&b, "VPSRLW $%d, Y2, Y5\n", -s)
			default:
				hb = "Y2"
			}
			if vnni {
				// Y4 |= hb & 0x30
				fmt.Fprintf(&b, "VPTERNLOGD $0xf8, Y15, %s, Y4\n", hb)
			} else {
				fmt.Fprintf(&b, "VPAND Y15, %s, Y5\nVPOR Y5, Y4, Y4\n", hb)
			}
			first := h == 0 && q == 0 // the block's first product starts the sum
			fmt.Fprintf(&b, "VPMADDUBSW %d(DI), Y4, Y4\nVPSHUFB q6rsc<>+%d(SB), %s, Y5\n", 128*h+32*q, 32*q, sc)
			switch {
			case first:
				b.WriteString("VPMADDWD Y5, Y4, Y1\n")
			case vnni:
				b.WriteString("VPDPWSSD Y5, Y4, Y1\n")
			default:
				b.WriteString("VPMADDWD Y5, Y4, Y4\nVPADDD Y4, Y1, Y1\n")
			}
		}
	}
	b.WriteString("VPSUBD Y9, Y1, Y1")
	b.WriteString(kTail(210))
	return b.String()
}
