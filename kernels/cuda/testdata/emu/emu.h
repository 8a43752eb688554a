// emu.h: a tiny SIMT emulator that runs Sluice's CUDA kernels on the CPU,
// one block at a time with one std::thread per CUDA thread, so the kernels'
// indexing, barriers, warp shuffles and shared memory can be checked on a
// machine without a GPU. It is a test harness only: slow, and it models
// just what these kernels use (__syncthreads, __shfl_xor_sync over full
// warps, static and dynamic __shared__, atomicMin on shared ints).
#pragma once
#include <algorithm>
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

struct uint3_ { unsigned x = 0, y = 0, z = 0; };
struct dim3 { unsigned x = 1, y = 1, z = 1; };
struct float4 { float x, y, z, w; };

inline thread_local uint3_ threadIdx, blockIdx;
inline dim3 blockDim, gridDim;
inline std::barrier<>* emu_block_bar;
inline std::vector<std::unique_ptr<std::barrier<>>> emu_warp_bars;
inline float emu_shfl_f[1024];
inline int emu_shfl_i[1024];
inline std::vector<float> emu_dynsmem;

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(x)
#define __shared__ static
#define __restrict__

using std::min;
using std::max;

inline void __syncthreads() { emu_block_bar->arrive_and_wait(); }

inline float __shfl_xor_sync(unsigned, float v, int o) {
	unsigned t = threadIdx.x, w = t / 32;
	emu_shfl_f[t] = v;
	emu_warp_bars[w]->arrive_and_wait();
	float r = emu_shfl_f[(t & ~31u) | ((t & 31u) ^ (unsigned)o)];
	emu_warp_bars[w]->arrive_and_wait();
	return r;
}

inline int __shfl_xor_sync(unsigned, int v, int o) {
	unsigned t = threadIdx.x, w = t / 32;
	emu_shfl_i[t] = v;
	emu_warp_bars[w]->arrive_and_wait();
	int r = emu_shfl_i[(t & ~31u) | ((t & 31u) ^ (unsigned)o)];
	emu_warp_bars[w]->arrive_and_wait();
	return r;
}

inline int atomicMin(int* p, int v) {
	std::atomic_ref<int> a(*p);
	int old = a.load();
	while (v < old && !a.compare_exchange_weak(old, v)) {
	}
	return old;
}

struct __half { uint16_t bits; };
inline __half __ushort_as_half(uint16_t b) { return __half{b}; }
inline float __half2float(__half h) {
	uint32_t sign = (uint32_t)(h.bits >> 15) << 31, exp = (h.bits >> 10) & 0x1f, mant = h.bits & 0x3ff, f;
	if (exp == 0 && mant == 0) f = sign;
	else if (exp == 0) {
		uint32_t e = 127 - 15 + 1;
		while (!(mant & 0x400)) { mant <<= 1; e--; }
		f = sign | e << 23 | (mant & 0x3ff) << 13;
	} else if (exp == 0x1f) f = sign | 0xffu << 23 | mant << 13;
	else f = sign | (exp + 127 - 15) << 23 | mant << 13;
	float r;
	std::memcpy(&r, &f, 4);
	return r;
}

// launch runs kernel over grid × block, blocks one after another.
inline void launch(dim3 grid, dim3 block, size_t dynFloats, const std::function<void()>& kernel) {
	gridDim = grid;
	blockDim = block;
	emu_dynsmem.assign(dynFloats + 1, 0.f);
	unsigned n = block.x;
	for (unsigned by = 0; by < grid.y; by++)
		for (unsigned bx = 0; bx < grid.x; bx++) {
			std::barrier<> bar(n);
			emu_block_bar = &bar;
			emu_warp_bars.clear();
			for (unsigned w = 0; w < (n + 31) / 32; w++) emu_warp_bars.emplace_back(new std::barrier<>(std::min(32u, n - 32 * w)));
			std::vector<std::thread> ts;
			for (unsigned t = 0; t < n; t++)
				ts.emplace_back([&, t, bx, by] {
					threadIdx = {t, 0, 0};
					blockIdx = {bx, by, 0};
					kernel();
				});
			for (auto& th : ts) th.join();
		}
}
