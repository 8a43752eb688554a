// membw measures this machine's streaming read bandwidth: T threads each
// sum its own part of a buffer far larger than the caches with AVX2 loads,
// R times; the best pass is reported in GB/s (10^9 bytes per second) of
// wall time and per CPU-second (bytes over the threads' summed CPU time:
// on a shared, loaded machine the steadier figure, comparable with the
// benchmarks' GB/cpu-s).
//
//	gcc -O2 -mavx2 -pthread -o /tmp/membw scripts/membw.c && /tmp/membw 2 2048 10
//
// (threads, MiB, passes[, streams]). With streams S > 1 each thread reads its
// part as S ranges far apart, 128 bytes of each in turn (the access pattern of
// the multi-stream batch-1 kernels, which keep more cache lines in flight per
// core than one stream does). Used for the rooflines of docs/bench/*.md.
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static size_t part;
static int streams = 1;
static char *buf;
static pthread_barrier_t bar;
static double sink[64];
static double cpu[64];

static double now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static double thread_cpu(void) {
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static void *reader(void *arg) {
	long id = (long)arg;
	double c0 = thread_cpu();
	const __m256i *p = (const __m256i *)(buf + id * part);
	size_t n = part / 32 / streams / 4 * 4;
	__m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
	for (size_t i = 0; i < n; i += 4) {
		for (int s = 0; s < streams; s++) {
			const __m256i *q = p + s * n + i;
			a0 = _mm256_add_epi64(a0, _mm256_load_si256(q));
			a1 = _mm256_add_epi64(a1, _mm256_load_si256(q + 1));
			a2 = _mm256_add_epi64(a2, _mm256_load_si256(q + 2));
			a3 = _mm256_add_epi64(a3, _mm256_load_si256(q + 3));
		}
	}
	a0 = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
	sink[id] += (double)_mm256_extract_epi64(a0, 0);
	cpu[id] = thread_cpu() - c0;
	return NULL;
}

int main(int argc, char **argv) {
	int threads = argc > 1 ? atoi(argv[1]) : 2;
	size_t mib = argc > 2 ? atoi(argv[2]) : 2048;
	int passes = argc > 3 ? atoi(argv[3]) : 10;
	streams = argc > 4 ? atoi(argv[4]) : 1;
	if (streams < 1 || streams > 16) return 2;
	size_t total = mib << 20;
	part = total / threads / 128 * 128;
	if (posix_memalign((void **)&buf, 64, total)) return 1;
	memset(buf, 1, total);
	double best = 0, bestCPU = 0;
	for (int r = 0; r < passes; r++) {
		pthread_t th[64];
		double t0 = now();
		for (long i = 0; i < threads; i++) pthread_create(&th[i], NULL, reader, (void *)i);
		for (int i = 0; i < threads; i++) pthread_join(th[i], NULL);
		double bytes = (double)(part / 32 / streams / 4 * 4) * 32 * streams * threads;
		double gbs = bytes / (now() - t0) / 1e9;
		double cs = 0;
		for (int i = 0; i < threads; i++) cs += cpu[i];
		double gbc = bytes / cs / 1e9;
		printf("pass %d: %.1f GB/s, %.1f GB/cpu-s\n", r, gbs, gbc);
		if (gbs > best) best = gbs;
		if (gbc > bestCPU) bestCPU = gbc;
	}
	printf("threads %d, streams %d, %zu MiB: best %.1f GB/s, %.1f GB/cpu-s\n", threads, streams, mib, best, bestCPU);
	return sink[0] == 12345 ? 1 : 0;
}
