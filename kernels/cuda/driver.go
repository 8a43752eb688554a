//go:build cuda

package cuda

// The CUDA driver API and cuBLAS, both loaded at run time with dlopen: the
// binary has no DT_NEEDED on libcuda or libcublas, so one build runs on any
// driver ≥ 520 and with whichever cuBLAS the machine has (a CUDA 13 image
// ships it only as the pip wheel nvidia-cublas). The prototypes come from
// the toolkit headers the build sees (Debian's CUDA 11.8): every function is
// bound by its versioned symbol name (cuMemAlloc_v2, cublasSgemm_v2, …),
// which later drivers and cuBLAS releases keep exporting with the same ABI.
// Nothing here is global: each Backend loads its own table (dlopen is
// reference-counted, so a second backend costs one dlsym pass).

/*
#cgo LDFLAGS: -ldl
#include <cuda.h>
#include <cublas_v2.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>

#define SLUICE_CU_FUNCS(X) \
	X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) \
	X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetName) X(cuDeviceTotalMem_v2) X(cuDeviceGetAttribute) \
	X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease_v2) X(cuCtxSetCurrent) \
	X(cuStreamCreate) X(cuStreamSynchronize) X(cuStreamDestroy_v2) \
	X(cuModuleLoadData) X(cuModuleGetFunction) X(cuModuleUnload) \
	X(cuMemAlloc_v2) X(cuMemFree_v2) X(cuMemAllocHost_v2) X(cuMemFreeHost) \
	X(cuMemcpyHtoD_v2) X(cuMemcpyHtoDAsync_v2) X(cuMemcpyDtoHAsync_v2) X(cuMemsetD32Async) \
	X(cuLaunchKernel)

#define SLUICE_CUBLAS_FUNCS(X) \
	X(cublasCreate_v2) X(cublasDestroy_v2) X(cublasSetStream_v2) X(cublasSetMathMode) \
	X(cublasSgemm_v2) X(cublasGetVersion_v2)

#define SLUICE_FIELD(n) __typeof__(n)* n;
// ctx is the context every call below makes current first (NULL until
// sluice_ctx_set): a goroutine may move to another OS thread between two
// cgo calls, and a CUDA context is current per thread, so the context is
// set inside the same C call as the operation that needs it.
typedef struct { SLUICE_CU_FUNCS(SLUICE_FIELD) CUcontext ctx; } sluice_cu;
typedef struct { SLUICE_CUBLAS_FUNCS(SLUICE_FIELD) } sluice_cublas;
#undef SLUICE_FIELD

static void* sluice_dlopen(const char* path, int global) {
	return dlopen(path, RTLD_NOW | (global ? RTLD_GLOBAL : RTLD_LOCAL));
}

static const char* sluice_dlerror(void) {
	const char* e = dlerror();
	return e ? e : "unknown dlopen error";
}

// sluice_bind_* fill the table from h and return the first missing symbol
// (NULL when all resolve).
#define SLUICE_BIND(n) a->n = (__typeof__(n)*)dlsym(h, #n); if (a->n == NULL) return #n;
static const char* sluice_bind_cu(void* h, sluice_cu* a) { SLUICE_CU_FUNCS(SLUICE_BIND) return NULL; }
static const char* sluice_bind_cublas(void* h, sluice_cublas* a) { SLUICE_CUBLAS_FUNCS(SLUICE_BIND) return NULL; }
#undef SLUICE_BIND

// SLUICE_CTX makes a->ctx current on this thread or returns the error.
#define SLUICE_CTX(a) do { \
	if ((a)->ctx != NULL) { CUresult r_ = (a)->cuCtxSetCurrent((a)->ctx); if (r_ != CUDA_SUCCESS) return r_; } \
} while (0)

static const char* sluice_err_name(const sluice_cu* a, CUresult r) {
	const char* s = NULL;
	if (a->cuGetErrorName(r, &s) == CUDA_SUCCESS && s != NULL) return s;
	switch (r) { // a stub or a broken driver cannot name its errors
	case CUDA_ERROR_STUB_LIBRARY: return "CUDA_ERROR_STUB_LIBRARY";
	case CUDA_ERROR_NO_DEVICE: return "CUDA_ERROR_NO_DEVICE";
	case CUDA_ERROR_NOT_INITIALIZED: return "CUDA_ERROR_NOT_INITIALIZED";
	case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH: return "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH";
	case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE: return "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE";
	default: return "CUDA_ERROR_UNKNOWN";
	}
}

static CUresult sluice_init(const sluice_cu* a, int* version) {
	CUresult r = a->cuDriverGetVersion(version);
	if (r != CUDA_SUCCESS) return r;
	return a->cuInit(0);
}
static CUresult sluice_device_count(const sluice_cu* a, int* n) { return a->cuDeviceGetCount(n); }
static CUresult sluice_device_get(const sluice_cu* a, CUdevice* d, int i) { return a->cuDeviceGet(d, i); }
static CUresult sluice_device_name(const sluice_cu* a, char* s, int n, CUdevice d) { return a->cuDeviceGetName(s, n, d); }
static CUresult sluice_device_mem(const sluice_cu* a, size_t* n, CUdevice d) { return a->cuDeviceTotalMem_v2(n, d); }
static CUresult sluice_device_attr(const sluice_cu* a, int* v, int attr, CUdevice d) {
	return a->cuDeviceGetAttribute(v, (CUdevice_attribute)attr, d);
}
static CUresult sluice_ctx_retain(const sluice_cu* a, CUcontext* c, CUdevice d) { return a->cuDevicePrimaryCtxRetain(c, d); }
static CUresult sluice_ctx_release(const sluice_cu* a, CUdevice d) { return a->cuDevicePrimaryCtxRelease_v2(d); }
static CUresult sluice_ctx_set(sluice_cu* a, CUcontext c) { a->ctx = c; return a->cuCtxSetCurrent(c); }
static CUresult sluice_ctx_detach(const sluice_cu* a) { return a->cuCtxSetCurrent(NULL); }
static CUresult sluice_stream_create(const sluice_cu* a, CUstream* s) { SLUICE_CTX(a); return a->cuStreamCreate(s, CU_STREAM_NON_BLOCKING); }
static CUresult sluice_stream_sync(const sluice_cu* a, CUstream s) { SLUICE_CTX(a); return a->cuStreamSynchronize(s); }
static CUresult sluice_stream_destroy(const sluice_cu* a, CUstream s) { SLUICE_CTX(a); return a->cuStreamDestroy_v2(s); }
static CUresult sluice_module_load(const sluice_cu* a, CUmodule* m, const void* image) { SLUICE_CTX(a); return a->cuModuleLoadData(m, image); }
static CUresult sluice_module_func(const sluice_cu* a, CUfunction* f, CUmodule m, const char* name) {
	SLUICE_CTX(a);
	return a->cuModuleGetFunction(f, m, name);
}
static CUresult sluice_module_unload(const sluice_cu* a, CUmodule m) { SLUICE_CTX(a); return a->cuModuleUnload(m); }
static CUresult sluice_mem_alloc(const sluice_cu* a, CUdeviceptr* p, size_t n) { SLUICE_CTX(a); return a->cuMemAlloc_v2(p, n); }
static CUresult sluice_mem_free(const sluice_cu* a, CUdeviceptr p) { SLUICE_CTX(a); return a->cuMemFree_v2(p); }
static void* sluice_alloc_host(const sluice_cu* a, size_t n, CUresult* r) {
	void* p = NULL;
	if (a->ctx != NULL && (*r = a->cuCtxSetCurrent(a->ctx)) != CUDA_SUCCESS) return NULL;
	*r = a->cuMemAllocHost_v2(&p, n);
	return p;
}
static CUresult sluice_free_host(const sluice_cu* a, void* p) { SLUICE_CTX(a); return a->cuMemFreeHost(p); }
static CUresult sluice_htod(const sluice_cu* a, CUdeviceptr d, const void* s, size_t n) { SLUICE_CTX(a); return a->cuMemcpyHtoD_v2(d, s, n); }
static CUresult sluice_htod_async(const sluice_cu* a, CUdeviceptr d, const void* s, size_t n, CUstream st) {
	SLUICE_CTX(a);
	return a->cuMemcpyHtoDAsync_v2(d, s, n, st);
}
static CUresult sluice_dtoh_async(const sluice_cu* a, void* d, CUdeviceptr s, size_t n, CUstream st) {
	SLUICE_CTX(a);
	return a->cuMemcpyDtoHAsync_v2(d, s, n, st);
}
static CUresult sluice_memset32_async(const sluice_cu* a, CUdeviceptr d, unsigned v, size_t n, CUstream st) {
	SLUICE_CTX(a);
	return a->cuMemsetD32Async(d, v, n, st);
}
static CUresult sluice_launch(const sluice_cu* a, CUfunction f, unsigned gx, unsigned gy, unsigned gz,
	unsigned bx, unsigned by, unsigned bz, unsigned shmem, CUstream s, void* args, size_t argBytes) {
	SLUICE_CTX(a);
	void* extra[] = {
		CU_LAUNCH_PARAM_BUFFER_POINTER, args,
		CU_LAUNCH_PARAM_BUFFER_SIZE, &argBytes,
		CU_LAUNCH_PARAM_END,
	};
	return a->cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, s, NULL, extra);
}

// SLUICE_BLAS_CTX is SLUICE_CTX for the cuBLAS wrappers (a failed
// cuCtxSetCurrent becomes CUBLAS_STATUS_NOT_INITIALIZED).
#define SLUICE_BLAS_CTX(cu) do { \
	if ((cu)->ctx != NULL && (cu)->cuCtxSetCurrent((cu)->ctx) != CUDA_SUCCESS) return CUBLAS_STATUS_NOT_INITIALIZED; \
} while (0)

static cublasStatus_t sluice_cublas_create(const sluice_cublas* a, const sluice_cu* cu, cublasHandle_t* h, CUstream s, int tf32, int* version) {
	SLUICE_BLAS_CTX(cu);
	cublasStatus_t st = a->cublasCreate_v2(h);
	if (st != CUBLAS_STATUS_SUCCESS) return st;
	st = a->cublasGetVersion_v2(*h, version);
	if (st != CUBLAS_STATUS_SUCCESS) return st;
	st = a->cublasSetStream_v2(*h, (cudaStream_t)s);
	if (st != CUBLAS_STATUS_SUCCESS) return st;
	return a->cublasSetMathMode(*h, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
}
static cublasStatus_t sluice_cublas_destroy(const sluice_cublas* a, const sluice_cu* cu, cublasHandle_t h) {
	SLUICE_BLAS_CTX(cu);
	return a->cublasDestroy_v2(h);
}

// sluice_sgemm_nt: row-major out[n x m] = x[n x k] . w[m x k]^T, i.e. in
// cuBLAS's column-major terms out^T = w^T(op T) . x^T.
static cublasStatus_t sluice_sgemm_nt(const sluice_cublas* a, const sluice_cu* cu, cublasHandle_t h, int m, int n, int k,
	CUdeviceptr w, int ldw, CUdeviceptr x, int ldx, CUdeviceptr out, int ldo) {
	SLUICE_BLAS_CTX(cu);
	const float one = 1.0f, zero = 0.0f;
	return a->cublasSgemm_v2(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one,
		(const float*)(uintptr_t)w, ldw, (const float*)(uintptr_t)x, ldx, &zero,
		(float*)(uintptr_t)out, ldo);
}
*/
import "C"

import (
	"fmt"
	"os"
	"strings"
	"unsafe"
)

// devPtr is a device address (CUdeviceptr).
type devPtr uint64

// Device attributes read by DeviceInfo (CUdevice_attribute).
const (
	attrSMCount       = C.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
	attrMemClockKHz   = C.CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE
	attrBusWidthBits  = C.CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH
	attrComputeMajor  = C.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
	attrComputeMinor  = C.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR
	cudaErrorNoDevice = C.CUDA_ERROR_NO_DEVICE
	cudaErrorStub     = C.CUDA_ERROR_STUB_LIBRARY
)

// driver is one backend's table of driver API entry points.
type driver struct {
	api     *C.sluice_cu // C memory: cgo pointer rules forbid Go memory holding C function pointers being passed around freely
	path    string       // the library that was loaded
	version int          // cuDriverGetVersion, e.g. 13000
}

// ResultError is a failed driver API call.
type ResultError struct {
	Op   string // the call, e.g. "cuMemAlloc 4096 bytes"
	Code int    // the CUresult
	Name string // its name, e.g. "CUDA_ERROR_OUT_OF_MEMORY"
}

// Error names the call, the result's name and its number.
func (e *ResultError) Error() string { return fmt.Sprintf("%s: %s (%d)", e.Op, e.Name, e.Code) }

// check turns a CUresult into nil or a *ResultError.
func (d *driver) check(r C.CUresult, op string) error {
	if r == C.CUDA_SUCCESS {
		return nil
	}
	return &ResultError{Op: op, Code: int(r), Name: C.GoString(C.sluice_err_name(d.api, r))}
}

// dlopenFirst opens the first candidate that loads and binds; it returns
// the handle, the candidate, and a report of every failed try.
func dlopenFirst(cands []string, bind func(h unsafe.Pointer) string, preload func(string)) (unsafe.Pointer, string, []string) {
	var tried []string
	for _, c := range cands {
		if preload != nil {
			preload(c)
		}
		cs := C.CString(c)
		h := C.sluice_dlopen(cs, 0)
		C.free(unsafe.Pointer(cs))
		if h == nil {
			tried = append(tried, fmt.Sprintf("%s (%s)", c, C.GoString(C.sluice_dlerror())))
			continue
		}
		if missing := bind(h); missing != "" {
			tried = append(tried, fmt.Sprintf("%s (loaded, but has no %s)", c, missing))
			continue // the handle stays open: dlclose of a half-used library gains nothing
		}
		return h, c, tried
	}
	return nil, "", tried
}

// loadDriver dlopens the driver library (see driverCandidates), binds the
// entry points and calls cuInit. Errors wrap ErrNoDriver (no loadable
// library: nothing in the list exists or binds) or ErrNoDevice (the
// library loaded but cuInit reports no usable GPU, as a stub library does).
func loadDriver() (*driver, error) {
	api := (*C.sluice_cu)(C.calloc(1, C.size_t(unsafe.Sizeof(C.sluice_cu{}))))
	cands := driverCandidates(os.Getenv)
	_, path, tried := dlopenFirst(cands, func(h unsafe.Pointer) string {
		if m := C.sluice_bind_cu(h, api); m != nil {
			return C.GoString(m)
		}
		return ""
	}, nil)
	if path == "" {
		C.free(unsafe.Pointer(api))
		return nil, fmt.Errorf("%w: tried %s", ErrNoDriver, strings.Join(tried, "; "))
	}
	d := &driver{api: api, path: path}
	var v C.int
	if err := d.check(C.sluice_init(api, &v), "cuInit"); err != nil {
		return nil, fmt.Errorf("%w: driver library %s: %w", ErrNoDevice, path, err)
	}
	d.version = int(v)
	return d, nil
}

// cublasLib is one backend's cuBLAS entry points.
type cublasLib struct {
	api  *C.sluice_cublas
	path string
}

// loadCUBLAS dlopens cuBLAS from cublasCandidates (the Python site folders
// are only asked for when no soname loads). Before a candidate given as a
// path, the libcublasLt beside it is loaded, so its DT_NEEDED resolves
// whatever the folder's RUNPATH says.
func loadCUBLAS() (*cublasLib, error) {
	api := (*C.sluice_cublas)(C.calloc(1, C.size_t(unsafe.Sizeof(C.sluice_cublas{}))))
	bind := func(h unsafe.Pointer) string {
		if m := C.sluice_bind_cublas(h, api); m != nil {
			return C.GoString(m)
		}
		return ""
	}
	preload := func(c string) {
		if lt := cublasLtBeside(c); lt != "" {
			cs := C.CString(lt)
			C.sluice_dlopen(cs, 1) // failure shows when cuBLAS itself is opened
			C.free(unsafe.Pointer(cs))
		}
	}
	_, path, tried := dlopenFirst(cublasNames(os.Getenv), bind, preload)
	if path == "" {
		var more []string
		_, path, more = dlopenFirst(cublasPaths(os.Getenv, pythonSitePackages(), globFiles), bind, preload)
		tried = append(tried, more...)
	}
	if path == "" {
		C.free(unsafe.Pointer(api))
		return nil, fmt.Errorf("%w: tried %s (set %s to the library's path)", ErrNoCUBLAS, strings.Join(tried, "; "), EnvCUBLAS)
	}
	return &cublasLib{api: api, path: path}, nil
}

// args packs kernel parameters with the alignment nvcc's ABI gives them.
type args struct {
	buf [256]byte
	n   uintptr
}

func (a *args) reset() *args { a.n = 0; return a }

func (a *args) align(k uintptr) { a.n = (a.n + k - 1) &^ (k - 1) }

func (a *args) ptr(p devPtr) *args {
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

// device, cuCtx, stream, module and function are driver handles.
type (
	device   C.CUdevice
	cuCtx    C.CUcontext
	stream   C.CUstream
	module   C.CUmodule
	function C.CUfunction
)

func (d *driver) deviceCount() (int, error) {
	var n C.int
	err := d.check(C.sluice_device_count(d.api, &n), "cuDeviceGetCount")
	return int(n), err
}

func (d *driver) device(i int) (device, error) {
	var dv C.CUdevice
	err := d.check(C.sluice_device_get(d.api, &dv, C.int(i)), fmt.Sprintf("cuDeviceGet %d", i))
	return device(dv), err
}

func (d *driver) deviceName(dv device) (string, error) {
	var buf [256]C.char
	if err := d.check(C.sluice_device_name(d.api, &buf[0], C.int(len(buf)), C.CUdevice(dv)), "cuDeviceGetName"); err != nil {
		return "", err
	}
	return C.GoString(&buf[0]), nil
}

func (d *driver) deviceMem(dv device) (int64, error) {
	var n C.size_t
	err := d.check(C.sluice_device_mem(d.api, &n, C.CUdevice(dv)), "cuDeviceTotalMem")
	return int64(n), err
}

func (d *driver) attr(dv device, a int) (int, error) {
	var v C.int
	err := d.check(C.sluice_device_attr(d.api, &v, C.int(a), C.CUdevice(dv)), fmt.Sprintf("cuDeviceGetAttribute %d", a))
	return int(v), err
}

func (d *driver) retainPrimary(dv device) (cuCtx, error) {
	var c C.CUcontext
	err := d.check(C.sluice_ctx_retain(d.api, &c, C.CUdevice(dv)), "cuDevicePrimaryCtxRetain")
	return cuCtx(c), err
}

func (d *driver) releasePrimary(dv device) error {
	return d.check(C.sluice_ctx_release(d.api, C.CUdevice(dv)), "cuDevicePrimaryCtxRelease")
}

func (d *driver) setCurrent(c cuCtx) error {
	return d.check(C.sluice_ctx_set(d.api, C.CUcontext(c)), "cuCtxSetCurrent")
}

// detachThread leaves this OS thread with no current context (the table
// keeps its own), as a thread the goroutine moves to may be: tests use it.
func (d *driver) detachThread() error {
	return d.check(C.sluice_ctx_detach(d.api), "cuCtxSetCurrent NULL")
}

func (d *driver) newStream() (stream, error) {
	var s C.CUstream
	err := d.check(C.sluice_stream_create(d.api, &s), "cuStreamCreate")
	return stream(s), err
}

func (d *driver) sync(s stream) error {
	return d.check(C.sluice_stream_sync(d.api, C.CUstream(s)), "cuStreamSynchronize")
}

func (d *driver) destroyStream(s stream) error {
	return d.check(C.sluice_stream_destroy(d.api, C.CUstream(s)), "cuStreamDestroy")
}

// loadModule loads a fatbin, cubin or PTX image (copied to C memory for the
// call: the driver may read it after cgo's pointer rules allow).
func (d *driver) loadModule(image []byte) (module, error) {
	p := C.CBytes(append(image, 0))
	defer C.free(p)
	var m C.CUmodule
	err := d.check(C.sluice_module_load(d.api, &m, p), "cuModuleLoadData")
	return module(m), err
}

func (d *driver) function(m module, name string) (function, error) {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	var f C.CUfunction
	err := d.check(C.sluice_module_func(d.api, &f, C.CUmodule(m), cs), "cuModuleGetFunction "+name)
	return function(f), err
}

func (d *driver) unload(m module) error {
	return d.check(C.sluice_module_unload(d.api, C.CUmodule(m)), "cuModuleUnload")
}

func (d *driver) memAlloc(bytes int64) (devPtr, error) {
	var p C.CUdeviceptr
	err := d.check(C.sluice_mem_alloc(d.api, &p, C.size_t(bytes)), fmt.Sprintf("cuMemAlloc %d bytes", bytes))
	return devPtr(p), err
}

func (d *driver) memFree(p devPtr) error {
	return d.check(C.sluice_mem_free(d.api, C.CUdeviceptr(p)), "cuMemFree")
}

// allocPinned allocates n bytes of page-locked host memory, from which
// async copies really are async (from pageable memory the driver first
// waits for the stream).
func (d *driver) allocPinned(n int) (unsafe.Pointer, error) {
	var r C.CUresult
	p := C.sluice_alloc_host(d.api, C.size_t(n), &r)
	return p, d.check(r, fmt.Sprintf("cuMemAllocHost %d bytes", n))
}

func (d *driver) freePinned(p unsafe.Pointer) {
	if p != nil {
		C.sluice_free_host(d.api, p)
	}
}

func (d *driver) htoD(dst devPtr, src unsafe.Pointer, bytes int64) error {
	return d.check(C.sluice_htod(d.api, C.CUdeviceptr(dst), src, C.size_t(bytes)), "cuMemcpyHtoD")
}

func (d *driver) htoDAsync(dst devPtr, src unsafe.Pointer, bytes int64, s stream) error {
	return d.check(C.sluice_htod_async(d.api, C.CUdeviceptr(dst), src, C.size_t(bytes), C.CUstream(s)), "cuMemcpyHtoDAsync")
}

func (d *driver) dtoHAsync(dst unsafe.Pointer, src devPtr, bytes int64, s stream) error {
	return d.check(C.sluice_dtoh_async(d.api, dst, C.CUdeviceptr(src), C.size_t(bytes), C.CUstream(s)), "cuMemcpyDtoHAsync")
}

func (d *driver) memsetD32Async(dst devPtr, v uint32, words int64, s stream) error {
	return d.check(C.sluice_memset32_async(d.api, C.CUdeviceptr(dst), C.uint(v), C.size_t(words), C.CUstream(s)), "cuMemsetD32Async")
}

func (d *driver) launch(f function, s stream, grid, block dim3, shmem int, a *args) error {
	r := C.sluice_launch(d.api, C.CUfunction(f), C.uint(grid.x), C.uint(max(grid.y, 1)), C.uint(max(grid.z, 1)),
		C.uint(block.x), C.uint(max(block.y, 1)), C.uint(max(block.z, 1)), C.uint(shmem), C.CUstream(s),
		unsafe.Pointer(&a.buf[0]), C.size_t(a.n))
	return d.check(r, "cuLaunchKernel")
}

// blas is a cuBLAS handle bound to one stream.
type blas struct {
	lib     *cublasLib
	cu      *C.sluice_cu // the driver table whose context each call makes current
	h       C.cublasHandle_t
	version int // cublasGetVersion, e.g. 130100
}

func newBLAS(lib *cublasLib, d *driver, s stream, tf32 bool) (*blas, error) {
	b := &blas{lib: lib, cu: d.api}
	t := C.int(0)
	if tf32 {
		t = 1
	}
	var v C.int
	if st := C.sluice_cublas_create(lib.api, b.cu, &b.h, C.CUstream(s), t, &v); st != C.CUBLAS_STATUS_SUCCESS {
		return nil, fmt.Errorf("cublas init (%s): status %d", lib.path, int(st))
	}
	b.version = int(v)
	return b, nil
}

// gemmNT sets row-major out[n × m] = x[n × k] · wᵀ for w [m × k].
func (b *blas) gemmNT(m, n, k int, w devPtr, ldw int, x devPtr, ldx int, out devPtr, ldo int) error {
	st := C.sluice_sgemm_nt(b.lib.api, b.cu, b.h, C.int(m), C.int(n), C.int(k), C.CUdeviceptr(w), C.int(ldw),
		C.CUdeviceptr(x), C.int(ldx), C.CUdeviceptr(out), C.int(ldo))
	if st != C.CUBLAS_STATUS_SUCCESS {
		return fmt.Errorf("cublasSgemm %d×%d×%d: status %d", m, n, k, int(st))
	}
	return nil
}

func (b *blas) close() {
	if b != nil && b.h != nil {
		C.sluice_cublas_destroy(b.lib.api, b.cu, b.h)
		b.h = nil
	}
}
