// mxbody measures what bounds the MXFP4 table tiles of
// kernels/cpu/mxtile_amd64.s on this machine: the throughput of their
// vector ops alone, and the block body of the two-weight-row, four-row
// tile (dotMXFP4Tab2x4AVX2: two weight blocks decoded, eight block-rows of
// VPMADDUBSW, VPADDW of the correction, VPMADDWD, VCVTDQ2PS, scale
// broadcast and FMA) with its operands in registers and then, step by
// step, with the loads the real tile makes (activations, corrections,
// scale table, weight block) from L1-resident buffers. The last two
// lines depend on the buffers' placement: 1.12–1.21 ns with this layout,
// 0.75–0.82 in a build with the table in an 8 KiB buffer (cause not
// found). Figures are CPU-ns
// per op or per block and activation row (process CPU time), with the
// clock measured by a chain of 1-cycle adds. Used for docs/bench/gpt-oss.md.
//
//	gcc -O2 -mavx2 -mfma -o /tmp/mxbody scripts/mxbody.c && /tmp/mxbody
#include <stdio.h>
#include <time.h>

static double cpu(void) {
	struct timespec t;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

#define CLOB "rax", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10"

// eight independent ops of one kind
#define OP8(op)                                                                          \
	op " %%ymm15, %%ymm0, %%ymm0\n\t" op " %%ymm15, %%ymm1, %%ymm1\n\t" op             \
	   " %%ymm15, %%ymm2, %%ymm2\n\t" op " %%ymm15, %%ymm3, %%ymm3\n\t" op             \
	   " %%ymm15, %%ymm4, %%ymm4\n\t" op " %%ymm15, %%ymm5, %%ymm5\n\t" op             \
	   " %%ymm15, %%ymm6, %%ymm6\n\t" op " %%ymm15, %%ymm7, %%ymm7\n\t"

// a weight block's decode from a register (Y11) or from memory at w+o
#define DECR "vpsrlvd %%ymm12, %%ymm11, %%ymm8\n\t vpand %%ymm14, %%ymm8, %%ymm8\n\t vpshufb %%ymm8, %%ymm13, %%ymm8\n\t"
#define DECM(o)                                                                          \
	"movzbl " o "(%3), %%eax\n\t vbroadcasti128 1+" o "(%3), %%ymm8\n\t vpsrlvd %%ymm12, %%ymm8, %%ymm8\n\t" \
	" vpand %%ymm14, %%ymm8, %%ymm8\n\t vpshufb %%ymm8, %%ymm13, %%ymm8\n\t"

// one block-row: activations X, correction C, scale S are a register or
// a load at offset o of x (%0), c (%1), the table (%2)
#define ROW(X, C, S, acc)                                                                \
	"vpmaddubsw " X ", %%ymm8, %%ymm9\n\t vpaddw " C ", %%ymm9, %%ymm9\n\t"            \
	" vpmaddwd %%ymm15, %%ymm9, %%ymm9\n\t vcvtdq2ps %%ymm9, %%ymm9\n\t" S            \
	" vfmadd231ps %%ymm9, %%ymm10, " acc "\n\t"
#define SREG ""
#define SMEM(o) "vbroadcastss " o "(%2), %%ymm10\n\t"

#define BLOCK(DEC0, DEC1, R)                                                             \
	DEC0 R("0", "%%ymm0") R("64", "%%ymm1") R("128", "%%ymm2") R("192", "%%ymm3")      \
	    DEC1 R("0", "%%ymm4") R("64", "%%ymm5") R("128", "%%ymm6") R("192", "%%ymm7")

#define R_REG(o, acc) ROW("%%ymm13", "%%ymm14", SREG, acc)
#define R_X(o, acc) ROW(o "(%0)", "%%ymm14", SREG, acc)
#define R_XC(o, acc) ROW(o "(%0)", o "(%1)", SREG, acc)
#define R_S(o, acc) ROW("%%ymm13", "%%ymm14", SMEM(o), acc)
#define R_XCS(o, acc) ROW(o "(%0)", o "(%1)", SMEM(o), acc)

static char x[4096] __attribute__((aligned(64)));
static char c[4096] __attribute__((aligned(64)));
static char ts[4096] __attribute__((aligned(64)));
static char w[4096] __attribute__((aligned(64)));

#define RUN(name, body, per)                                                             \
	do {                                                                             \
		double t = cpu();                                                        \
		for (long n = 0; n < N; n++)                                             \
			__asm__ volatile(body ::"r"(x), "r"(c), "r"(ts), "r"(w) : CLOB); \
		t = cpu() - t;                                                           \
		printf("%-58s %.3f ns\n", name, t * 1e9 / (N * (double)per));            \
	} while (0)

int main(void) {
	const long N = 50000000;
	long k = 0;
	double t = cpu();
	for (long n = 0; n < 4 * N; n++)
		__asm__ volatile("add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0" : "+r"(k));
	t = cpu() - t;
	printf("clock (1-cycle add chain)                                  %.2f GHz\n", 16.0 * N / t / 1e9);
	RUN("VPMADDUBSW, per op", OP8("vpmaddubsw"), 8);
	RUN("VPMADDWD, per op", OP8("vpmaddwd"), 8);
	RUN("VPADDW, per op", OP8("vpaddw"), 8);
	RUN("VFMADD231PS, per op", OP8("vfmadd231ps"), 8);
	RUN("2x4 body, registers only (no scale broadcast), per block-row", BLOCK(DECR, DECR, R_REG), 8);
	RUN("  + activations from L1", BLOCK(DECR, DECR, R_X), 8);
	RUN("  + activations and corrections from L1", BLOCK(DECR, DECR, R_XC), 8);
	RUN("registers + scale broadcast from L1", BLOCK(DECR, DECR, R_S), 8);
	RUN("activations, corrections, scales from L1", BLOCK(DECR, DECR, R_XCS), 8);
	RUN("  + weight blocks from L1 (the tile's whole body)", BLOCK(DECM("0"), DECM("17"), R_XCS), 8);
	return (int)(k & 1);
}
