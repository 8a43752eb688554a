// Package runner is the real-model executor of engine-core: it implements
// sched.Executor over a model.Model. It owns the physical KV cache (per
// layer, K and V tensors of numBlocks*blockSize rows of kvHeads*headDim
// values; the scheduler's kvcache hands out the block ids), turns each
// scheduled step into one varlen batch (prefill chunks and decode tokens
// together, with positions, block tables and slot mapping), runs the
// forward pass, keeps only the logits rows that must be sampled, and calls
// the sampler.
//
// On a backend that samples on the device (kernels.DeviceSampler, the CUDA
// backend) the runner leaves the logits there and copies back only the
// sampled ids, for every row whose parameters the device rule serves with
// the host sampler's semantics; the other rows of the step are sampled on
// the host from their copied logits (see deviceParams).
//
// Steady-state steps allocate nothing: the batch-description slices and the
// activations are reused, and grow only when a step is larger than any
// before it.
package runner

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluice-llm/sluice/engine-core/model"
	"github.com/sluice-llm/sluice/engine-core/sample"
	"github.com/sluice-llm/sluice/engine-core/sched"
	"github.com/sluice-llm/sluice/kernels"
	"github.com/sluice-llm/sluice/kernels/cpu"
	"github.com/sluice-llm/sluice/modelfile/modelref"
)

// Sampler picks tokens from rows of logits; *sample.Sampler satisfies it.
type Sampler interface {
	Sample(logits []float32, in []sample.Input, out []sample.Result) error
}

// Config configures a Runner.
type Config struct {
	// Model is a Hugging Face directory, a .gguf file, a llama2.c .bin
	// checkpoint, "demo" / "demo-tiny" / "demo-15m" / "demo-110m" (a
	// generated random-weight model, cached under $XDG_CACHE_HOME/sluice),
	// or a Hugging Face Hub id "org/name" (downloaded; see ResolveModel).
	Model string
	// NumBlocks is the number of KV blocks. When 0, KVCacheBytes decides
	// (KVCacheBytes / KVBytesPerBlock); when both are 0, DefaultKVBudget
	// does.
	NumBlocks    int
	KVCacheBytes int64
	// KVCacheDType is "auto" (the default), "float32" or "float16"
	// ("fp16", "half"). Auto is float32 for a model stored in float32 and
	// float16 for any narrower format (F16, BF16, quantized). With float16
	// the CPU backend the runner makes holds the KV cache as float16
	// (cpu.Options.KVF16). A Backend given in Backend decides for itself.
	KVCacheDType string
	// MemAvailable reports the memory the system can give (default: the
	// MemAvailable line of /proc/meminfo); the default KV budget is taken
	// from it.
	MemAvailable func() (int64, error)
	// BlockSize is the number of positions per KV block (default 16).
	BlockSize int
	// Threads is the number of compute threads (default GOMAXPROCS).
	Threads int
	// FutexSleep lets the CPU backend's threads sleep on a futex between
	// ops (cpu.Options.FutexSleep; off by default).
	FutexSleep bool
	// ExactQ8 keeps activations in F32 when they meet Q8_0 weights on the
	// CPU backend. By default small batches (decode) quantize them to Q8_0
	// and use integer dot products, as llama.cpp does (about twice as fast;
	// see cpu.Options.QuantizeActivations for the error).
	ExactQ8 bool
	// GroupMXFP4 lets prefill's MXFP4 expert groups of 8 or more rows take
	// the CPU backend's faster group tiles (cpu.Options.GroupMXFP4), whose
	// activation rounding (one scale per 320 values) depends on the
	// group's size; off, MXFP4 products do not depend on the batch.
	GroupMXFP4 bool
	// MaxModelLen caps the context length (default: the model's).
	MaxModelLen int
	// MaxBatchTokens and MaxSeqs size the activations up front (defaults
	// 512 and 64); bigger steps grow them. On the CPU backend the
	// per-token activations hold at most model.DefaultScratchRows tokens
	// and larger steps run in passes (model.Scratch).
	MaxBatchTokens, MaxSeqs int
	// Sampler overrides the default sample.New(vocab). A runner given its
	// own Sampler samples every row with it, on the host.
	Sampler Sampler
	// HostSampling samples every row on the host even when the backend
	// can sample on the device (kernels.DeviceSampler).
	HostSampling bool
	// Backend overrides the default CPU backend; the runner does not close
	// a backend it was given.
	Backend kernels.Backend
	// UnifiedKV keeps one block table for every layer even when the model
	// has sliding-window layers (by default they get their own KV group:
	// model.NewSplitKVCache, Info.SlidingWindow).
	UnifiedKV bool
}

// Info is what the engine announces in READY.
type Info struct {
	// Name is the model's display name.
	Name string
	// Arch is "llama", "qwen2" or "qwen3".
	Arch        string
	VocabSize   int
	BOS         int32 // -1 when none
	EOS         []int32
	MaxModelLen int
	NumBlocks   int
	BlockSize   int
	// KVCacheBytes is the memory of the KV cache (NumBlocks blocks) and
	// KVDType its element type ("float32" or "float16").
	KVCacheBytes int64
	KVDType      string
	// WeightBytes is the size of the weights as the model file stores them.
	WeightBytes int64
	// ScratchBytes is the memory of the forward pass's activations and
	// ScratchRows the most tokens one pass runs (model.Scratch: a larger
	// step runs in passes, so neither grows with MaxBatchTokens).
	ScratchBytes int64
	ScratchRows  int
	// KVBudget says how the number of blocks was chosen ("num-kv-blocks",
	// "kv-cache-memory", or the default's reasoning).
	KVBudget string
	// SlidingWindow, when positive, says the model's sliding-window layers
	// keep their own block table (a split cache; a block holds one group's
	// layers): the scheduler must run with sched.Config.SlidingWindow set
	// to it and send SeqWork.WindowTable.
	SlidingWindow int
}

// Runner executes scheduled batches on a real model.
type Runner struct {
	m       *model.Model
	be      kernels.Backend
	ownBE   bool
	kv      *model.KVCache
	scratch *model.Scratch
	sampler Sampler
	info    Info

	// dev is the backend's device sampler, nil when every row is sampled
	// on the host.
	dev kernels.DeviceSampler

	// per-step buffers, reused
	batch     model.Batch
	sampleSeq []int
	in        []sample.Input
	res       []sample.Result

	// device sampling: the first nDev rows of a step go to the device with
	// devParams (all greedy when devGreedy); hostOut and hostSeq stage the
	// other rows while the batch is built; hostLogits and gatherRows move
	// them to the front of a tensor of their own in a mixed step.
	nDev       int
	devGreedy  bool
	devParams  []kernels.SampleParams
	devIDs     []int32
	devLPs     []float32
	hostOut    []int32
	hostSeq    []int
	hostLogits kernels.Tensor
	gatherRows []int32
	// rows sampled so far on the device and on the host
	devRows, hostRows uint64
}

var _ sched.Executor = (*Runner)(nil)

// ResolveModel turns a Config.Model value into a local path (see
// modelref.Resolve: the demo model, a Hugging Face Hub id, or a path).
func ResolveModel(name string) (string, error) {
	p, err := modelref.Resolve(context.Background(), name)
	if err != nil {
		return "", fmt.Errorf("runner: %w", err)
	}
	return p, nil
}

// New loads the model and allocates the KV cache.
func New(cfg Config) (*Runner, error) {
	if cfg.Model == "" {
		return nil, errors.New("runner: no model given")
	}
	path, err := ResolveModel(cfg.Model)
	if err != nil {
		return nil, err
	}
	if cfg.BlockSize <= 0 {
		cfg.BlockSize = 16
	}
	if cfg.MaxBatchTokens <= 0 {
		cfg.MaxBatchTokens = 512
	}
	if cfg.MaxSeqs <= 0 {
		cfg.MaxSeqs = 64
	}
	r := &Runner{be: cfg.Backend}
	kvDType := "float32"
	if r.be == nil {
		half := false
		switch cfg.KVCacheDType {
		case "", "auto":
			f32, err := model.WeightsF32(path)
			if err != nil {
				return nil, fmt.Errorf("runner: kv cache dtype auto: %w", err)
			}
			half = !f32
		case "float32", "fp32":
		case "float16", "fp16", "half":
			half = true
		default:
			return nil, fmt.Errorf("runner: kv cache dtype %q: want auto, float32 or float16", cfg.KVCacheDType)
		}
		if half {
			kvDType = "float16"
		}
		r.be = cpu.New(cpu.Options{Threads: cfg.Threads, QuantizeActivations: !cfg.ExactQ8, KVF16: half, GroupMXFP4: cfg.GroupMXFP4, FutexSleep: cfg.FutexSleep})
		r.ownBE = true
	} else if kernels.KVElemBytes(r.be) == 2 {
		kvDType = "float16"
	}
	r.m, err = model.Load(path, r.be, model.LoadOptions{MaxPos: cfg.MaxModelLen})
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("runner: %w", err)
	}
	c := &r.m.Cfg
	perBlock, window := r.m.KVBytesPerBlock(cfg.BlockSize), 0
	if !cfg.UnifiedKV && r.m.KVWindow() > 0 {
		perBlock, window = r.m.SplitKVBytesPerBlock(cfg.BlockSize), r.m.KVWindow()
	}
	nb, why := cfg.NumBlocks, "num-kv-blocks"
	if nb <= 0 && cfg.KVCacheBytes > 0 {
		nb, why = int(cfg.KVCacheBytes/perBlock), "kv-cache-memory"
	}
	if nb <= 0 {
		memAvail := cfg.MemAvailable
		if memAvail == nil {
			memAvail = MemAvailable
		}
		avail, err := memAvail()
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("runner: default KV-cache budget (give --kv-cache-memory or --num-kv-blocks): %w", err)
		}
		var budget int64
		// weights the loader copied are resident already: MemAvailable
		// has counted them out
		budget, why = DefaultKVBudget(avail, r.m.WeightBytes()-r.m.CopiedWeightBytes(), perBlock, cfg.BlockSize, c.MaxPos, cfg.MaxSeqs)
		nb = int(budget / perBlock)
	}
	if window > 0 {
		r.kv = r.m.NewSplitKVCache(nb, cfg.BlockSize)
	} else {
		r.kv = r.m.NewKVCache(nb, cfg.BlockSize)
	}
	r.scratch = r.m.NewScratch(cfg.MaxBatchTokens, cfg.MaxSeqs)
	r.sampler = cfg.Sampler
	if r.sampler == nil {
		r.sampler = sample.New(c.Vocab)
		if ds, ok := r.be.(kernels.DeviceSampler); ok && !cfg.HostSampling {
			r.dev = ds
		}
	}
	r.info = Info{Name: c.Name, Arch: c.Arch, VocabSize: c.Vocab, BOS: c.BOS, EOS: c.EOS,
		MaxModelLen: c.MaxPos, NumBlocks: nb, BlockSize: cfg.BlockSize,
		KVCacheBytes: int64(nb) * perBlock, KVDType: kvDType, WeightBytes: r.m.WeightBytes(), KVBudget: why,
		SlidingWindow: window, ScratchBytes: r.scratch.Bytes(), ScratchRows: r.scratch.Rows()}
	return r, nil
}

// Info returns the model facts the engine announces.
func (r *Runner) Info() Info { return r.info }

// DeviceSampling reports whether the runner samples eligible rows on the
// device (its backend implements kernels.DeviceSampler, and neither
// Config.Sampler nor Config.HostSampling was set).
func (r *Runner) DeviceSampling() bool { return r.dev != nil }

// SampledRows returns how many rows the runner has sampled on the device
// and on the host (from logits copied to the host).
func (r *Runner) SampledRows() (device, host uint64) { return r.devRows, r.hostRows }

// Model returns the loaded model.
func (r *Runner) Model() *model.Model { return r.m }

// KVBytesPerBlock is the cache memory of one block of this model (one
// group's layers when the cache is split).
func (r *Runner) KVBytesPerBlock() int64 {
	return r.info.KVCacheBytes / int64(max(1, r.info.NumBlocks))
}

// Close releases the model files and, if the runner made it, the backend.
func (r *Runner) Close() error {
	var err error
	if r.m != nil {
		err = r.m.Close()
		r.m = nil
	}
	if r.ownBE && r.be != nil {
		r.be.Close()
		r.be = nil
	}
	return err
}

// Release implements sched.Executor. The runner keeps no per-request
// state between steps (the scheduler sends full block tables each step),
// so there is nothing to drop.
func (r *Runner) Release(reqID string) {}

// Execute implements sched.Executor: one forward pass over every SeqWork
// of b, then one sampled token per SeqWork with Sample set.
func (r *Runner) Execute(b *sched.Batch, out []sample.Result) error {
	if len(out) < len(b.Seqs) {
		return fmt.Errorf("runner: %d results for %d seqs", len(out), len(b.Seqs))
	}
	if r.dev != nil {
		return r.executeDevice(b, out)
	}
	logits, err := r.Forward(b)
	if err != nil || len(r.sampleSeq) == 0 {
		return err
	}
	return r.sampleHost(b, logits, r.sampleSeq, out)
}

// sampleHost samples on the host the rows of logits, row k for seq
// seqs[k] of b.
func (r *Runner) sampleHost(b *sched.Batch, logits []float32, seqs []int, out []sample.Result) error {
	r.in = r.in[:0]
	for _, i := range seqs {
		r.in = append(r.in, b.Seqs[i].In)
	}
	if cap(r.res) < len(r.in) {
		r.res = make([]sample.Result, len(r.in))
	}
	res := r.res[:len(r.in)]
	if err := r.sampler.Sample(logits, r.in, res); err != nil {
		return fmt.Errorf("runner: step %d: %w", b.Step, err)
	}
	for k, i := range seqs {
		out[i] = res[k]
	}
	r.hostRows += uint64(len(seqs))
	return nil
}

// Forward builds the varlen batch of b, runs the model and returns the
// logits of the seqs that sample, in order ([k × vocab]; a view reused by
// the next call). SampledSeqs tells which seq each row belongs to.
func (r *Runner) Forward(b *sched.Batch) ([]float32, error) {
	lt, err := r.forward(b, false)
	if err != nil || lt == nil {
		return nil, err
	}
	return r.be.ToHost(lt, len(r.sampleSeq)), nil
}

// forward builds the varlen batch of b and runs the model, leaving the
// logits on the backend (nil when b has no tokens). With split, the rows
// that deviceParams accepts come first (r.nDev of them, with r.devParams)
// and the host rows after them; otherwise the rows follow b.Seqs.
func (r *Runner) forward(b *sched.Batch, split bool) (kernels.Tensor, error) {
	bt := &r.batch
	a := &bt.Attn
	bs := r.info.BlockSize
	bt.Tokens, bt.Pos, bt.OutRows = bt.Tokens[:0], bt.Pos[:0], bt.OutRows[:0]
	a.QStart, a.CtxLen, a.Tables, a.TableStart, a.Slots = append(a.QStart[:0], 0), a.CtxLen[:0], a.Tables[:0], append(a.TableStart[:0], 0), a.Slots[:0]
	a.BlockSize = bs
	w := r.info.SlidingWindow
	wa := &bt.WinAttn
	wa.Tables, wa.TableStart, wa.Slots = wa.Tables[:0], append(wa.TableStart[:0], 0), wa.Slots[:0]
	r.sampleSeq = r.sampleSeq[:0]
	r.nDev, r.devGreedy, r.devParams = 0, true, r.devParams[:0]
	r.hostOut, r.hostSeq = r.hostOut[:0], r.hostSeq[:0]
	for i := range b.Seqs {
		sw := &b.Seqs[i]
		if len(sw.Tokens) == 0 {
			if sw.Sample {
				return nil, fmt.Errorf("runner: step %d: request %s asks to sample with no tokens", b.Step, sw.ReqID)
			}
			continue
		}
		end := sw.StartPos + len(sw.Tokens)
		if sw.StartPos < 0 || end > r.info.MaxModelLen {
			return nil, fmt.Errorf("runner: step %d: request %s positions [%d, %d) outside [0, %d)", b.Step, sw.ReqID, sw.StartPos, end, r.info.MaxModelLen)
		}
		if need := (end + bs - 1) / bs; len(sw.BlockTable) < need {
			return nil, fmt.Errorf("runner: step %d: request %s has %d blocks for %d positions (block size %d)", b.Step, sw.ReqID, len(sw.BlockTable), end, bs)
		}
		for _, blk := range sw.BlockTable {
			if blk < 0 || int(blk) >= r.info.NumBlocks {
				return nil, fmt.Errorf("runner: step %d: request %s uses block %d of %d", b.Step, sw.ReqID, blk, r.info.NumBlocks)
			}
		}
		if w > 0 {
			if err := r.checkWindowTable(b.Step, sw, end); err != nil {
				return nil, err
			}
			for p := sw.StartPos; p < end; p++ {
				wa.Slots = append(wa.Slots, sw.WindowTable[p/bs]*int32(bs)+int32(p%bs))
			}
			wa.Tables = append(wa.Tables, sw.WindowTable...)
			wa.TableStart = append(wa.TableStart, int32(len(wa.Tables)))
		}
		for j, t := range sw.Tokens {
			p := sw.StartPos + j
			bt.Tokens = append(bt.Tokens, t)
			bt.Pos = append(bt.Pos, int32(p))
			a.Slots = append(a.Slots, sw.BlockTable[p/bs]*int32(bs)+int32(p%bs))
		}
		a.QStart = append(a.QStart, int32(len(bt.Tokens)))
		a.CtxLen = append(a.CtxLen, int32(end))
		a.Tables = append(a.Tables, sw.BlockTable...)
		a.TableStart = append(a.TableStart, int32(len(a.Tables)))
		if !sw.Sample {
			continue
		}
		row := int32(len(bt.Tokens) - 1)
		if split {
			sp, ok := deviceParams(&sw.In)
			if !ok {
				r.hostOut, r.hostSeq = append(r.hostOut, row), append(r.hostSeq, i)
				continue
			}
			r.devParams = append(r.devParams, sp)
			r.devGreedy = r.devGreedy && sp.Temperature <= 0
		}
		bt.OutRows = append(bt.OutRows, row)
		r.sampleSeq = append(r.sampleSeq, i)
	}
	wa.QStart, wa.CtxLen, wa.BlockSize = a.QStart, a.CtxLen, bs
	r.nDev = len(r.devParams)
	bt.OutRows = append(bt.OutRows, r.hostOut...)
	r.sampleSeq = append(r.sampleSeq, r.hostSeq...)
	if len(bt.Tokens) == 0 {
		return nil, nil
	}
	if len(bt.Tokens) > r.scratch.MaxTokens || len(bt.OutRows) > r.scratch.MaxOut {
		r.scratch = r.m.NewScratch(max(len(bt.Tokens), r.scratch.MaxTokens), max(len(bt.OutRows), r.scratch.MaxOut))
	}
	logits, err := r.m.ForwardTensor(r.scratch, r.kv, bt)
	if err != nil {
		return nil, fmt.Errorf("runner: step %d: %w", b.Step, err)
	}
	return logits, nil
}

// checkWindowTable checks sw's sliding-window table: it covers positions
// [0, end), and every block the window layers read ([StartPos-W+1, end))
// is a block of the cache.
func (r *Runner) checkWindowTable(step uint64, sw *sched.SeqWork, end int) error {
	bs := r.info.BlockSize
	if need := (end + bs - 1) / bs; len(sw.WindowTable) < need {
		return fmt.Errorf("runner: step %d: request %s has %d window blocks for %d positions (the scheduler must run with SlidingWindow %d)",
			step, sw.ReqID, len(sw.WindowTable), end, r.info.SlidingWindow)
	}
	for i := max(0, sw.StartPos-r.info.SlidingWindow+1) / bs; i*bs < end; i++ {
		if blk := sw.WindowTable[i]; blk < 0 || int(blk) >= r.info.NumBlocks {
			return fmt.Errorf("runner: step %d: request %s uses window block %d of %d", step, sw.ReqID, blk, r.info.NumBlocks)
		}
	}
	return nil
}

// SampledSeqs returns, for the last Forward or Execute, the index in
// Batch.Seqs of each logits row (after an Execute that sampled on the
// device, the device rows come first).
func (r *Runner) SampledSeqs() []int { return r.sampleSeq }
