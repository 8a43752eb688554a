//go:build cuda

package cuda

// Small cgo bindings for what gorgonia.org/cu cannot express: cuBLAS on our
// stream with device pointers (cu/blas takes Go slices and has no stream
// setter), and kernel launches from a packed argument buffer without
// per-launch mallocs (cu's Function.Launch mallocs twice per call).

/*
#cgo LDFLAGS: -lcublas -lcuda
#include <cuda.h>
#include <cublas_v2.h>
#include <stdint.h>

static CUresult sluice_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
	unsigned bx, unsigned by, unsigned bz, unsigned shmem, CUstream s,
	void* args, size_t argBytes) {
	void* extra[] = {
		CU_LAUNCH_PARAM_BUFFER_POINTER, args,
		CU_LAUNCH_PARAM_BUFFER_SIZE, &argBytes,
		CU_LAUNCH_PARAM_END,
	};
	return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, s, NULL, extra);
}

static const char* sluice_err_name(CUresult r) {
	const char* s = NULL;
	if (cuGetErrorName(r, &s) != CUDA_SUCCESS || s == NULL) return "CUDA_ERROR_UNKNOWN";
	return s;
}

static void* sluice_alloc_host(size_t n, CUresult* r) {
	void* p = NULL;
	*r = cuMemAllocHost(&p, n);
	return p;
}

static cublasStatus_t sluice_cublas_create(cublasHandle_t* h, CUstream s, int tf32) {
	cublasStatus_t st = cublasCreate(h);
	if (st != CUBLAS_STATUS_SUCCESS) return st;
	st = cublasSetStream(*h, (cudaStream_t)s);
	if (st != CUBLAS_STATUS_SUCCESS) return st;
	return cublasSetMathMode(*h, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
}

// sluice_sgemm_nt: row-major out[n x m] = x[n x k] . w[m x k]^T, i.e. in
// cuBLAS's column-major terms out^T = w^T(op T) . x^T.
static cublasStatus_t sluice_sgemm_nt(cublasHandle_t h, int m, int n, int k,
	CUdeviceptr w, int ldw, CUdeviceptr x, int ldx, CUdeviceptr out, int ldo) {
	const float one = 1.0f, zero = 0.0f;
	return cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one,
		(const float*)(uintptr_t)w, ldw, (const float*)(uintptr_t)x, ldx, &zero,
		(float*)(uintptr_t)out, ldo);
}
*/
import "C"

import (
	"fmt"
	"unsafe"

	"gorgonia.org/cu"
)

// cuFunc and cuStream view cu's wrapper structs (one C handle each) as the
// C handles this package's cgo sees.
func cuFunc(f *cu.Function) C.CUfunction { return *(*C.CUfunction)(unsafe.Pointer(f)) }
func cuStream(s *cu.Stream) C.CUstream   { return *(*C.CUstream)(unsafe.Pointer(s)) }

// args packs kernel parameters with the alignment nvcc's ABI gives them.
type args struct {
	buf [256]byte
	n   uintptr
}

func (a *args) reset() *args { a.n = 0; return a }

func (a *args) align(k uintptr) { a.n = (a.n + k - 1) &^ (k - 1) }

func (a *args) ptr(p cu.DevicePtr) *args {
	a.align(8)
	*(*uint64)(unsafe.Pointer(&a.buf[a.n])) = uint64(p)
	a.n += 8
	return a
}

func (a *args) i32(v int) *args {
	a.align(4)
	*(*int32)(unsafe.Pointer(&a.buf[a.n])) = int32(v)
	a.n += 4
	return a
}

func (a *args) i64(v int64) *args {
	a.align(8)
	*(*int64)(unsafe.Pointer(&a.buf[a.n])) = v
	a.n += 8
	return a
}

func (a *args) f32(v float32) *args {
	a.align(4)
	*(*float32)(unsafe.Pointer(&a.buf[a.n])) = v
	a.n += 4
	return a
}

// dim3 is a grid or block size.
type dim3 struct{ x, y, z int }

func launch(f *cu.Function, s *cu.Stream, grid, block dim3, shmem int, a *args) error {
	r := C.sluice_launch(cuFunc(f), C.uint(grid.x), C.uint(max(grid.y, 1)), C.uint(max(grid.z, 1)),
		C.uint(block.x), C.uint(max(block.y, 1)), C.uint(max(block.z, 1)), C.uint(shmem), cuStream(s),
		unsafe.Pointer(&a.buf[0]), C.size_t(a.n))
	if r != C.CUDA_SUCCESS {
		return fmt.Errorf("cuLaunchKernel: %s (%d)", C.GoString(C.sluice_err_name(r)), int(r))
	}
	return nil
}

// allocPinned allocates n bytes of page-locked host memory, from which
// async copies really are async (from pageable memory the driver first
// waits for the stream).
func allocPinned(n int) (unsafe.Pointer, error) {
	var r C.CUresult
	p := C.sluice_alloc_host(C.size_t(n), &r)
	if r != C.CUDA_SUCCESS {
		return nil, fmt.Errorf("cuMemAllocHost %d bytes: %s (%d)", n, C.GoString(C.sluice_err_name(r)), int(r))
	}
	return p, nil
}

func freePinned(p unsafe.Pointer) {
	if p != nil {
		C.cuMemFreeHost(p)
	}
}

// blas is a cuBLAS handle bound to one stream.
type blas struct{ h C.cublasHandle_t }

func newBLAS(s *cu.Stream, tf32 bool) (*blas, error) {
	b := &blas{}
	t := C.int(0)
	if tf32 {
		t = 1
	}
	if st := C.sluice_cublas_create(&b.h, cuStream(s), t); st != C.CUBLAS_STATUS_SUCCESS {
		return nil, fmt.Errorf("cublas init: status %d", int(st))
	}
	return b, nil
}

// gemmNT sets row-major out[n × m] = x[n × k] · wᵀ for w [m × k].
func (b *blas) gemmNT(m, n, k int, w cu.DevicePtr, ldw int, x cu.DevicePtr, ldx int, out cu.DevicePtr, ldo int) error {
	st := C.sluice_sgemm_nt(b.h, C.int(m), C.int(n), C.int(k), C.CUdeviceptr(w), C.int(ldw),
		C.CUdeviceptr(x), C.int(ldx), C.CUdeviceptr(out), C.int(ldo))
	if st != C.CUBLAS_STATUS_SUCCESS {
		return fmt.Errorf("cublasSgemm %d×%d×%d: status %d", m, n, k, int(st))
	}
	return nil
}

func (b *blas) close() {
	if b != nil && b.h != nil {
		C.cublasDestroy(b.h)
		b.h = nil
	}
}
