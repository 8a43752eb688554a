//go:build cuda

package cuda

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"slices"
	"unsafe"

	"github.com/sluice-llm/sluice/kernels"
)

// The fatbins are build outputs of scripts/cuda-fatbin.sh (gitignored); a
// -tags cuda build without them fails here, which is the point.
//
//go:embed build/*.fatbin
var fatbins embed.FS

// Compiled reports whether this binary has the CUDA backend (built with
// -tags cuda).
const Compiled = true

// Launch geometry shared with the .cu sources.
const (
	attThreads    = 128 // ATT_THREADS in attention.cu
	attMaxHeadDim = 512 // ATT_THREADS * ATT_MAXD
	sampleThreads = 1024
	mmWarps       = 4
	mmRows        = 8 // MM_ROWS in matmul_q8.cu

	// q8WideMin is the fewest activation rows for which MatMul widens Q8_0
	// weights to F32 slices and uses cuBLAS; below it matmul_q8_0 reads each
	// weight block once per mmRows rows (H200, 5632×2048: 76 against 87 µs
	// at 32 rows, 145 against 98 at 64; docs/bench/cuda.md).
	q8WideMin = 40
	// q8WideScratch caps the scratch buffer of widened Q8_0 rows (bytes).
	q8WideScratch = 32 << 20
)

// tensor is a 2-D array in device memory.
type tensor struct {
	r, c int
	dt   kernels.DType
	p    devPtr
}

func (t *tensor) Rows() int            { return t.r }
func (t *tensor) Cols() int            { return t.c }
func (t *tensor) DType() kernels.DType { return t.dt }

// devBuf is a growable device buffer for per-step int32 metadata, with the
// host copy of what it holds so that an op repeated with the same slice
// contents (RoPE, WriteKV and Attention run once per layer) uploads once.
type devBuf struct {
	p      devPtr
	cap    int64
	shadow []int32
	valid  bool
}

// stage is a page-locked host arena that metadata uploads are copied
// through. It is reset whenever the stream has been synchronized (every
// copy out of it is then done) and synchronizes itself when full.
type stage struct {
	p          unsafe.Pointer
	size, used int
}

const stageInit = 1 << 20

// functions holds the kernels, looked up once.
type functions struct {
	rmsnorm, rope, siluMul, add, addRow function
	gatherRows, embedQ8, matmulQ8       function
	dequantQ8                           function
	writeKV, attention                  function
	softmax, argmax, sample             function
}

// Backend is the CUDA kernels.Backend. Ops are enqueued on one stream in
// program order; ToHost waits for it. A failed CUDA call is sticky: later
// ops are skipped, Err reports it, and ToHost panics with it rather than
// hand back stale numbers.
type Backend struct {
	drv    *driver
	dev    device
	ctx    cuCtx
	stream stream
	mods   []module
	fn     functions
	blas   *blas
	a      args
	err    error

	allocs      []devPtr
	weightBytes int64
	st          stage

	tok, gather, pos, slots, meta, tables, params, out devBuf
	wide                                               devBuf // widened Q8_0 weight rows (matMulQ8Wide)
	q8WideMin                                          int    // MatMul's Q8_0 path threshold (the constant; benchmarks sweep it)
	rowMeta                                            []int32
	paramsF                                            []float32
	host                                               []float32
	outHost                                            []int32
}

var (
	_ kernels.Backend = (*Backend)(nil)
	_ DeviceSampler   = (*Backend)(nil)
)

// New opens device opts.Device, loads the embedded kernels and creates the
// backend's stream and cuBLAS handle.
func New(opts Options) (kernels.Backend, error) {
	b, err := Open(opts)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// Open is New returning the concrete backend (for DeviceSampler and the
// device facts). It loads the driver library and cuBLAS at run time
// (driverCandidates, cublasNames, cublasPaths); the errors wrap
// ErrNoDriver, ErrNoDevice or ErrNoCUBLAS and name every place tried.
func Open(opts Options) (*Backend, error) {
	drv, err := loadDriver()
	if err != nil {
		return nil, err
	}
	n, err := drv.deviceCount()
	if err != nil {
		return nil, fmt.Errorf("cuda: count devices: %w", err)
	}
	if opts.Device < 0 || opts.Device >= n {
		return nil, fmt.Errorf("cuda: device %d requested, %d present", opts.Device, n)
	}
	lib, err := loadCUBLAS()
	if err != nil {
		return nil, err
	}
	b := &Backend{drv: drv, q8WideMin: q8WideMin}
	if b.dev, err = drv.device(opts.Device); err != nil {
		return nil, fmt.Errorf("cuda: device %d: %w", opts.Device, err)
	}
	if b.ctx, err = drv.retainPrimary(b.dev); err != nil {
		return nil, fmt.Errorf("cuda: device %d: retain primary context: %w", opts.Device, err)
	}
	if err := drv.setCurrent(b.ctx); err != nil {
		_ = drv.releasePrimary(b.dev)
		return nil, fmt.Errorf("cuda: set context: %w", err)
	}
	if b.stream, err = drv.newStream(); err != nil {
		_ = drv.releasePrimary(b.dev)
		return nil, fmt.Errorf("cuda: create stream: %w", err)
	}
	if err := b.loadKernels(); err != nil {
		b.Close()
		return nil, err
	}
	if b.st.p, err = drv.allocPinned(stageInit); err != nil {
		b.Close()
		return nil, fmt.Errorf("cuda: staging memory: %w", err)
	}
	b.st.size = stageInit
	if b.blas, err = newBLAS(lib, drv, b.stream, opts.AllowTF32); err != nil {
		b.Close()
		return nil, fmt.Errorf("cuda: %w", err)
	}
	return b, nil
}

// Libraries reports what Open loaded: the driver library and cuBLAS (as
// found: a soname or a path) and their versions (cuDriverGetVersion, e.g.
// 13000; cublasGetVersion, e.g. 130100).
func (b *Backend) Libraries() (driverLib string, driverVersion int, cublasLib string, cublasVersion int) {
	if b.drv != nil {
		driverLib, driverVersion = b.drv.path, b.drv.version
	}
	if b.blas != nil {
		cublasLib, cublasVersion = b.blas.lib.path, b.blas.version
	}
	return
}

func (b *Backend) loadKernels() error {
	files, err := fs.Glob(fatbins, "build/*.fatbin")
	if err != nil || len(files) == 0 {
		return fmt.Errorf("cuda: no embedded fatbins (run scripts/cuda-fatbin.sh before go build -tags cuda): %v", err)
	}
	for _, f := range files {
		data, err := fatbins.ReadFile(f)
		if err != nil {
			return fmt.Errorf("cuda: read %s: %w", f, err)
		}
		m, err := b.drv.loadModule(data)
		if err != nil {
			return fmt.Errorf("cuda: load module %s: %w (needs a GPU of compute capability 8.0 or later)", f, err)
		}
		b.mods = append(b.mods, m)
	}
	for _, k := range []struct {
		name string
		fn   *function
	}{
		{"rmsnorm_f32", &b.fn.rmsnorm}, {"rope_f32", &b.fn.rope}, {"silu_mul_f32", &b.fn.siluMul},
		{"add_f32", &b.fn.add}, {"add_row_f32", &b.fn.addRow}, {"gather_rows_f32", &b.fn.gatherRows},
		{"embed_q8_0", &b.fn.embedQ8}, {"matmul_q8_0", &b.fn.matmulQ8}, {"write_kv_f32", &b.fn.writeKV},
		{"dequant_q8_0", &b.fn.dequantQ8},
		{"paged_attention_f32", &b.fn.attention}, {"softmax_f32", &b.fn.softmax},
		{"argmax_f32", &b.fn.argmax}, {"sample_f32", &b.fn.sample},
	} {
		found := false
		for _, m := range b.mods {
			if f, err := b.drv.function(m, k.name); err == nil {
				*k.fn, found = f, true
				break
			}
		}
		if !found {
			return fmt.Errorf("cuda: kernel %s not in the embedded fatbins", k.name)
		}
	}
	return nil
}

// Name returns "cuda".
func (b *Backend) Name() string { return "cuda" }

// Err returns the first CUDA failure, if any.
func (b *Backend) Err() error { return b.err }

// WeightBytes is the device memory taken by weights so far.
func (b *Backend) WeightBytes() int64 { return b.weightBytes }

// DeviceInfo describes the device: its name, memory size, and theoretical
// peak memory bandwidth in bytes per second (2 × memory clock × bus width).
func (b *Backend) DeviceInfo() (name string, memBytes int64, peakBW float64, err error) {
	if name, err = b.drv.deviceName(b.dev); err != nil {
		return "", 0, 0, fmt.Errorf("cuda: device name: %w", err)
	}
	if memBytes, err = b.drv.deviceMem(b.dev); err != nil {
		return "", 0, 0, fmt.Errorf("cuda: device memory: %w", err)
	}
	clk, err := b.drv.attr(b.dev, attrMemClockKHz)
	if err != nil {
		return "", 0, 0, fmt.Errorf("cuda: memory clock: %w", err)
	}
	bus, err := b.drv.attr(b.dev, attrBusWidthBits)
	if err != nil {
		return "", 0, 0, fmt.Errorf("cuda: bus width: %w", err)
	}
	return name, memBytes, 2 * float64(clk) * 1e3 * float64(bus) / 8, nil
}

// ComputeCapability returns the device's compute capability and number of
// multiprocessors.
func (b *Backend) ComputeCapability() (major, minor, sms int, err error) {
	if major, err = b.drv.attr(b.dev, attrComputeMajor); err != nil {
		return 0, 0, 0, fmt.Errorf("cuda: compute capability: %w", err)
	}
	if minor, err = b.drv.attr(b.dev, attrComputeMinor); err != nil {
		return 0, 0, 0, fmt.Errorf("cuda: compute capability: %w", err)
	}
	if sms, err = b.drv.attr(b.dev, attrSMCount); err != nil {
		return 0, 0, 0, fmt.Errorf("cuda: multiprocessor count: %w", err)
	}
	return major, minor, sms, nil
}

// fail records the first error.
func (b *Backend) fail(err error) {
	if err != nil && b.err == nil {
		b.err = err
	}
}

// bind makes the backend's context current on this OS thread and reports
// whether ops may run. Every driver and cuBLAS call also makes the context
// current inside its own C call (driver.go's SLUICE_CTX): the goroutine may
// move to another OS thread between any two cgo calls, so setting it once
// per op was not enough (CUDA_ERROR_INVALID_CONTEXT on a 16-core H200).
func (b *Backend) bind() bool {
	if b.err != nil {
		return false
	}
	b.fail(b.drv.setCurrent(b.ctx))
	return b.err == nil
}

func (b *Backend) alloc(bytes int64) (devPtr, error) {
	p, err := b.drv.memAlloc(max(bytes, 4))
	if err != nil {
		return 0, fmt.Errorf("cuda: allocate %d bytes: %w", bytes, err)
	}
	b.allocs = append(b.allocs, p)
	return p, nil
}

// Weight uploads encoded host bytes (F32 or Q8_0) to device memory.
func (b *Backend) Weight(dt kernels.DType, rows, cols int, data []byte) (kernels.Tensor, error) {
	if rows <= 0 || cols <= 0 {
		return nil, fmt.Errorf("cuda: bad weight shape %d×%d", rows, cols)
	}
	switch dt {
	case kernels.F32:
	case kernels.Q8_0:
		if cols%kernels.Q8Block != 0 {
			return nil, fmt.Errorf("cuda: Q8_0 weight %d×%d: cols must be a multiple of %d", rows, cols, kernels.Q8Block)
		}
	default:
		return nil, fmt.Errorf("cuda: unsupported weight type %v", dt)
	}
	if want := rows * dt.RowBytes(cols); len(data) != want {
		return nil, fmt.Errorf("cuda: %v weight %d×%d needs %d bytes, got %d", dt, rows, cols, want, len(data))
	}
	return b.upload(dt, rows, cols, unsafe.Pointer(&data[0]), int64(len(data)))
}

// WeightF32 uploads host floats to device memory.
func (b *Backend) WeightF32(rows, cols int, data []float32) (kernels.Tensor, error) {
	if rows <= 0 || cols <= 0 || len(data) != rows*cols {
		return nil, fmt.Errorf("cuda: F32 weight %d×%d from %d floats", rows, cols, len(data))
	}
	return b.upload(kernels.F32, rows, cols, unsafe.Pointer(&data[0]), int64(len(data))*4)
}

func (b *Backend) upload(dt kernels.DType, rows, cols int, src unsafe.Pointer, bytes int64) (kernels.Tensor, error) {
	if !b.bind() {
		return nil, b.err
	}
	p, err := b.alloc(bytes)
	if err != nil {
		return nil, err
	}
	if err := b.drv.htoD(p, src, bytes); err != nil {
		return nil, fmt.Errorf("cuda: upload %d×%d %v weight: %w", rows, cols, dt, err)
	}
	b.weightBytes += bytes
	return &tensor{r: rows, c: cols, dt: dt, p: p}, nil
}

// Alloc makes a zeroed F32 tensor. Allocation failure is sticky (see Err).
func (b *Backend) Alloc(rows, cols int) kernels.Tensor {
	t := &tensor{r: rows, c: cols, dt: kernels.F32}
	if !b.bind() {
		return t
	}
	bytes := int64(rows) * int64(cols) * 4
	p, err := b.alloc(bytes)
	if err != nil {
		b.fail(err)
		return t
	}
	t.p = p
	b.fail(b.drv.memsetD32Async(p, 0, bytes/4, b.stream))
	return t
}

// put copies data into d on the stream (growing it first if needed) and
// returns its device address. With dedupe, identical contents already on
// the device are not copied again. Stream order makes reuse safe: the copy
// runs after every kernel enqueued before it.
func (b *Backend) put(d *devBuf, data []int32, dedupe bool) devPtr {
	if dedupe && d.valid && slices.Equal(d.shadow, data) {
		return d.p
	}
	need := int64(len(data)) * 4
	if need > d.cap {
		if d.p != 0 {
			b.fail(b.drv.sync(b.stream))
			b.fail(b.drv.memFree(d.p))
			d.p = 0
		}
		c := max(need, 2*d.cap, 4096)
		p, err := b.drv.memAlloc(c)
		if err != nil {
			b.fail(fmt.Errorf("cuda: allocate %d bytes of step metadata: %w", c, err))
			return 0
		}
		d.p, d.cap = p, c
	}
	if len(data) > 0 {
		src := b.stageCopy(data)
		if src == nil {
			return 0
		}
		b.fail(b.drv.htoDAsync(d.p, src, need, b.stream))
	}
	d.shadow = append(d.shadow[:0], data...)
	d.valid = b.err == nil
	return d.p
}

// stageCopy copies data into the pinned arena and returns where.
func (b *Backend) stageCopy(data []int32) unsafe.Pointer {
	n := len(data) * 4
	off := (b.st.used + 255) &^ 255
	if off+n > b.st.size {
		if b.Synchronize() != nil {
			return nil
		}
		off = 0
		if n > b.st.size {
			size := max(n, 2*b.st.size, stageInit)
			b.drv.freePinned(b.st.p)
			b.st.p, b.st.size = nil, 0
			p, err := b.drv.allocPinned(size)
			if err != nil {
				b.fail(fmt.Errorf("cuda: staging memory: %w", err))
				return nil
			}
			b.st.p, b.st.size = p, size
		}
	}
	dst := unsafe.Add(b.st.p, off)
	copy(unsafe.Slice((*int32)(dst), len(data)), data)
	b.st.used = off + n
	return dst
}

func (b *Backend) run(f *function, grid, block dim3, shmem int, a *args) {
	if b.err == nil {
		b.fail(b.drv.launch(*f, b.stream, grid, block, shmem, a))
	}
}

// gridFor sizes a grid-stride launch of total elements.
func gridFor(total int64, threads int) dim3 {
	return dim3{x: int(min((total+int64(threads)-1)/int64(threads), 65535*8)), y: 1, z: 1}
}

func dev(t kernels.Tensor) *tensor { return t.(*tensor) }

// MatMul implements kernels.Backend. F32 weights: cuBLAS (a warp-per-output
// F32 kernel like matmul_q8_0 measured level at 1 row and slower from 2).
// Q8_0 weights: matmul_q8_0 below q8WideMin rows, cuBLAS on widened slices
// of the weight from there.
func (b *Backend) MatMul(out, x, w kernels.Tensor, n int) {
	if n <= 0 || !b.bind() {
		return
	}
	o, xt, wt := dev(out), dev(x), dev(w)
	switch {
	case wt.dt == kernels.F32:
		b.fail(b.blas.gemmNT(wt.r, n, wt.c, wt.p, wt.c, xt.p, xt.c, o.p, o.c))
	case n >= b.q8WideMin:
		b.matMulQ8Wide(o, xt, wt, n)
	case xt.c%4 != 0:
		b.fail(fmt.Errorf("cuda: Q8_0 matmul: activation row stride %d is not a multiple of 4", xt.c))
	default:
		b.run(&b.fn.matmulQ8, dim3{(wt.r + mmWarps - 1) / mmWarps, (n + mmRows - 1) / mmRows, 1}, dim3{32 * mmWarps, 1, 1}, 0,
			b.a.reset().ptr(o.p).i32(o.c).ptr(xt.p).i32(xt.c).ptr(wt.p).i32(wt.c).i32(wt.r).i32(n))
	}
}

// matMulQ8Wide multiplies by a Q8_0 weight slice by slice: each slice of
// rows is widened to F32 in a scratch buffer of at most q8WideScratch bytes
// (dequant_q8_0, exact) and multiplied by cuBLAS into its columns of out.
// The stream orders each slice's widening after the previous slice's GEMM.
func (b *Backend) matMulQ8Wide(o, xt, wt *tensor, n int) {
	per := min(wt.r, max(1, q8WideScratch/(wt.c*4)))
	need := int64(per) * int64(wt.c) * 4
	if need > b.wide.cap {
		if b.wide.p != 0 {
			b.fail(b.drv.sync(b.stream))
			b.fail(b.drv.memFree(b.wide.p))
			b.wide.p, b.wide.cap = 0, 0
		}
		p, err := b.drv.memAlloc(need)
		if err != nil {
			b.fail(fmt.Errorf("cuda: allocate %d bytes for widened Q8_0 rows: %w", need, err))
			return
		}
		b.wide.p, b.wide.cap = p, need
	}
	rowBytes := int64(wt.c/kernels.Q8Block) * kernels.Q8BlockBytes
	for r := 0; r < wt.r && b.err == nil; r += per {
		m := min(per, wt.r-r)
		total := int64(m) * int64(wt.c)
		b.run(&b.fn.dequantQ8, gridFor(total, 256), dim3{256, 1, 1}, 0,
			b.a.reset().ptr(b.wide.p).ptr(wt.p+devPtr(int64(r)*rowBytes)).i64(total))
		b.fail(b.blas.gemmNT(m, n, wt.c, b.wide.p, wt.c, xt.p, xt.c, o.p+devPtr(r*4), o.c))
	}
}

// AddRow implements kernels.Backend.
func (b *Backend) AddRow(x, bias kernels.Tensor, n int) {
	if n <= 0 || !b.bind() {
		return
	}
	xt := dev(x)
	total := int64(n) * int64(xt.c)
	b.run(&b.fn.addRow, gridFor(total, 256), dim3{256, 1, 1}, 0,
		b.a.reset().ptr(xt.p).ptr(dev(bias).p).i32(xt.c).i64(total))
}

// Add implements kernels.Backend.
func (b *Backend) Add(out, x, y kernels.Tensor, n int) {
	if n <= 0 || !b.bind() {
		return
	}
	o := dev(out)
	total := int64(n) * int64(o.c)
	b.run(&b.fn.add, gridFor(total, 256), dim3{256, 1, 1}, 0,
		b.a.reset().ptr(o.p).ptr(dev(x).p).ptr(dev(y).p).i64(total))
}

// RMSNorm implements kernels.Backend.
func (b *Backend) RMSNorm(out, x, w kernels.Tensor, n int, eps float32) {
	if n <= 0 || !b.bind() {
		return
	}
	xt, wt := dev(x), dev(w)
	c := wt.c
	chunks := n * xt.c / c
	threads := min(256, (c+31)/32*32)
	b.run(&b.fn.rmsnorm, dim3{chunks, 1, 1}, dim3{threads, 1, 1}, 0,
		b.a.reset().ptr(dev(out).p).ptr(xt.p).ptr(wt.p).i32(c).f32(eps))
}

// RoPE implements kernels.Backend.
func (b *Backend) RoPE(x kernels.Tensor, pos []int32, table kernels.Tensor, headDim int, style kernels.RoPEStyle) {
	if len(pos) == 0 || !b.bind() {
		return
	}
	xt, tt := dev(x), dev(table)
	pp := b.put(&b.pos, pos, true)
	pairs := xt.c / headDim * headDim / 2 // whole heads only, as the reference
	b.run(&b.fn.rope, dim3{(pairs + 127) / 128, len(pos), 1}, dim3{128, 1, 1}, 0,
		b.a.reset().ptr(xt.p).i32(xt.c).ptr(pp).ptr(tt.p).i32(tt.c).i32(headDim).i32(int(style)))
}

// SiLUMul implements kernels.Backend.
func (b *Backend) SiLUMul(out, gate, up kernels.Tensor, n int) {
	if n <= 0 || !b.bind() {
		return
	}
	o := dev(out)
	total := int64(n) * int64(o.c)
	b.run(&b.fn.siluMul, gridFor(total, 256), dim3{256, 1, 1}, 0,
		b.a.reset().ptr(o.p).ptr(dev(gate).p).ptr(dev(up).p).i64(total))
}

// Embed implements kernels.Backend.
func (b *Backend) Embed(out, table kernels.Tensor, tokens []int32) {
	if len(tokens) == 0 || !b.bind() {
		return
	}
	o, tt := dev(out), dev(table)
	ids := b.put(&b.tok, tokens, false)
	threads := min(256, (tt.c+31)/32*32)
	if tt.dt == kernels.Q8_0 {
		b.run(&b.fn.embedQ8, dim3{len(tokens), 1, 1}, dim3{threads, 1, 1}, 0,
			b.a.reset().ptr(o.p).i32(o.c).ptr(tt.p).i32(tt.c).ptr(ids))
		return
	}
	b.run(&b.fn.gatherRows, dim3{len(tokens), 1, 1}, dim3{threads, 1, 1}, 0,
		b.a.reset().ptr(o.p).i32(o.c).ptr(tt.p).i32(tt.c).ptr(ids))
}

// Gather implements kernels.Backend.
func (b *Backend) Gather(out, x kernels.Tensor, rows []int32) {
	if len(rows) == 0 || !b.bind() {
		return
	}
	o, xt := dev(out), dev(x)
	idx := b.put(&b.gather, rows, false)
	b.run(&b.fn.gatherRows, dim3{len(rows), 1, 1}, dim3{min(256, (xt.c+31)/32*32), 1, 1}, 0,
		b.a.reset().ptr(o.p).i32(o.c).ptr(xt.p).i32(xt.c).ptr(idx))
}

// WriteKV implements kernels.Backend.
func (b *Backend) WriteKV(kCache, vCache, k, v kernels.Tensor, a *kernels.AttnBatch) {
	if len(a.Slots) == 0 || !b.bind() {
		return
	}
	kc, kt, vt := dev(kCache), dev(k), dev(v)
	sp := b.put(&b.slots, a.Slots, true)
	b.run(&b.fn.writeKV, dim3{len(a.Slots), 1, 1}, dim3{min(256, (kc.c+31)/32*32), 1, 1}, 0,
		b.a.reset().ptr(kc.p).ptr(dev(vCache).p).ptr(kt.p).ptr(vt.p).i32(kc.c).i32(kt.c).i32(vt.c).ptr(sp))
}

// Attention implements kernels.Backend: one block per (head, query row)
// over the row's sequence's block table.
func (b *Backend) Attention(out, q, kCache, vCache kernels.Tensor, a *kernels.AttnBatch, s kernels.AttnShape) {
	ns := a.NumSeqs()
	if ns <= 0 || !b.bind() {
		return
	}
	if s.HeadDim <= 0 || s.HeadDim > attMaxHeadDim || s.KVHeads <= 0 || s.Heads%s.KVHeads != 0 {
		b.fail(fmt.Errorf("cuda: attention shape %+v unsupported (head dim 1..%d, heads a multiple of kv heads)", s, attMaxHeadDim))
		return
	}
	rows := int(a.QStart[ns])
	b.rowMeta = b.rowMeta[:0]
	for sq := 0; sq < ns; sq++ {
		q0, q1, ctx := a.QStart[sq], a.QStart[sq+1], a.CtxLen[sq]
		for i := q0; i < q1; i++ {
			b.rowMeta = append(b.rowMeta, a.TableStart[sq], ctx-(q1-i)+1)
		}
	}
	mp := b.put(&b.meta, b.rowMeta, true)
	tp := b.put(&b.tables, a.Tables, true)
	o, qt, kc := dev(out), dev(q), dev(kCache)
	b.run(&b.fn.attention, dim3{s.Heads, rows, 1}, dim3{attThreads, 1, 1}, 4*s.HeadDim,
		b.a.reset().ptr(o.p).i32(o.c).ptr(qt.p).i32(qt.c).ptr(kc.p).ptr(dev(vCache).p).i32(kc.c).
			ptr(tp).ptr(mp).i32(a.BlockSize).i32(s.Heads).i32(s.KVHeads).i32(s.HeadDim).f32(s.Scale))
}

// Softmax turns each of the first n rows of x into probabilities in place.
func (b *Backend) Softmax(x kernels.Tensor, n int) {
	if n <= 0 || !b.bind() {
		return
	}
	xt := dev(x)
	b.run(&b.fn.softmax, dim3{n, 1, 1}, dim3{min(1024, (xt.c+31)/32*32), 1, 1}, 0,
		b.a.reset().ptr(xt.p).i32(xt.c))
}

// Synchronize waits for every enqueued op and returns the first failure.
func (b *Backend) Synchronize() error {
	if b.bind() {
		b.fail(b.drv.sync(b.stream))
	}
	if b.err == nil {
		b.st.used = 0 // every copy out of the staging arena has run
	}
	return b.err
}

// ToHost implements kernels.Backend. It panics if a CUDA call has failed
// (the device state is then unknown; see Err).
func (b *Backend) ToHost(t kernels.Tensor, n int) []float32 {
	tt := dev(t)
	m := n * tt.c
	if cap(b.host) < m {
		b.host = make([]float32, m)
	}
	h := b.host[:m]
	if m > 0 && b.bind() {
		b.fail(b.drv.dtoHAsync(unsafe.Pointer(&h[0]), tt.p, int64(m)*4, b.stream))
	}
	if err := b.Synchronize(); err != nil {
		panic(fmt.Sprintf("cuda backend: %v", err))
	}
	return h
}

// Greedy implements DeviceSampler.
func (b *Backend) Greedy(logits kernels.Tensor, n int, ids []int32, logprobs []float32) error {
	if len(ids) < n || len(logprobs) < n {
		return fmt.Errorf("cuda: greedy over %d rows into %d ids / %d logprobs", n, len(ids), len(logprobs))
	}
	if n == 0 {
		return nil
	}
	if !b.bind() {
		return b.err
	}
	lt := dev(logits)
	op := b.outBuf(n)
	b.run(&b.fn.argmax, dim3{n, 1, 1}, dim3{sampleThreads, 1, 1}, 0,
		b.a.reset().ptr(lt.p).i32(lt.c).i32(lt.c).ptr(op).ptr(op+devPtr(4*n)))
	return b.fetchIDs(n, ids, logprobs)
}

// SampleRows implements DeviceSampler.
func (b *Backend) SampleRows(logits kernels.Tensor, n int, params []SampleParams, ids []int32, logprobs []float32) error {
	if len(ids) < n || len(logprobs) < n || len(params) < n {
		return fmt.Errorf("cuda: sample %d rows with %d params into %d ids / %d logprobs", n, len(params), len(ids), len(logprobs))
	}
	if n == 0 {
		return nil
	}
	b.paramsF = b.paramsF[:0]
	for _, p := range params[:n] {
		if !(p.U >= 0 && p.U < 1) {
			return fmt.Errorf("cuda: sample: U %v outside [0, 1)", p.U)
		}
		b.paramsF = append(b.paramsF, p.Temperature, p.TopP, float32(p.TopK), p.U)
	}
	if !b.bind() {
		return b.err
	}
	lt := dev(logits)
	pp := b.put(&b.params, unsafe.Slice((*int32)(unsafe.Pointer(&b.paramsF[0])), len(b.paramsF)), false)
	op := b.outBuf(n)
	b.run(&b.fn.sample, dim3{n, 1, 1}, dim3{sampleThreads, 1, 1}, 0,
		b.a.reset().ptr(lt.p).i32(lt.c).i32(lt.c).ptr(pp).ptr(op).ptr(op+devPtr(4*n)))
	return b.fetchIDs(n, ids, logprobs)
}

// outBuf returns a device buffer of 2n words: ids, then logprobs.
func (b *Backend) outBuf(n int) devPtr {
	need := int64(8 * n)
	if need > b.out.cap {
		if b.out.p != 0 {
			b.fail(b.drv.sync(b.stream))
			b.fail(b.drv.memFree(b.out.p))
			b.out.p = 0
		}
		c := max(need, 4096)
		p, err := b.drv.memAlloc(c)
		if err != nil {
			b.fail(fmt.Errorf("cuda: allocate %d bytes of sample output: %w", c, err))
			return 0
		}
		b.out.p, b.out.cap = p, c
	}
	return b.out.p
}

func (b *Backend) fetchIDs(n int, ids []int32, logprobs []float32) error {
	if cap(b.outHost) < 2*n {
		b.outHost = make([]int32, 2*n)
	}
	h := b.outHost[:2*n]
	if b.err == nil {
		b.fail(b.drv.dtoHAsync(unsafe.Pointer(&h[0]), b.out.p, int64(8*n), b.stream))
	}
	if err := b.Synchronize(); err != nil {
		return err
	}
	copy(ids, h[:n])
	for i := range n {
		logprobs[i] = math.Float32frombits(uint32(h[n+i]))
	}
	return nil
}

// Close releases device memory, the kernels, the stream and the context.
func (b *Backend) Close() {
	if b.drv == nil || b.ctx == nil {
		return
	}
	d := b.drv
	var errs []error
	errs = append(errs, d.setCurrent(b.ctx), d.sync(b.stream))
	b.blas.close()
	b.blas = nil
	for _, p := range b.allocs {
		errs = append(errs, d.memFree(p))
	}
	b.allocs = nil
	for _, db := range []*devBuf{&b.tok, &b.gather, &b.pos, &b.slots, &b.meta, &b.tables, &b.params, &b.out, &b.wide} {
		if db.p != 0 {
			errs = append(errs, d.memFree(db.p))
			*db = devBuf{}
		}
	}
	for _, m := range b.mods {
		errs = append(errs, d.unload(m))
	}
	b.mods = nil
	d.freePinned(b.st.p)
	b.st = stage{}
	errs = append(errs, d.destroyStream(b.stream), d.releasePrimary(b.dev))
	b.ctx = nil
	b.fail(errors.Join(errs...))
	b.fail(errors.New("cuda: backend closed")) // later ops are skipped
}
