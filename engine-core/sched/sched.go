// Package sched is engine-core's scheduler: it decides, step by step, which
// requests compute which tokens, and turns sampled tokens into outputs.
//
// It is pure and synchronous, in the manner of etcd's raft.RawNode: no
// goroutines, no sockets, no clock (the caller passes the time in). Exactly
// one goroutine (engine-core's busy loop) owns a Scheduler. One step is
//
//	b := s.Schedule(now)           // plan the step
//	s.DrainReleased(exec.Release)  // preempted requests
//	exec.Execute(b, results)       // forward pass + sampling
//	s.Update(b, results, now, emit)
//	s.DrainReleased(exec.Release)  // finished requests
//
// # Policy
//
// Continuous batching with a token budget (vLLM v1's scheduler, §7 of
// design/vllm-notes.md), with these choices:
//
//   - Running requests go first: decodes (one token each) before prefill
//     chunks, so a long prompt never delays the tokens of running streams.
//     Then waiting requests are admitted in (priority, arrival) order while
//     the step has token budget (MaxNumBatchedTokens) and fewer than
//     MaxNumSeqs requests run. Admission stops at the first request that
//     does not fit (no overtaking), and no request is admitted in a step
//     that preempted one.
//   - Chunked prefill: a prompt is cut to the budget left in the step; its
//     remaining tokens are computed in later steps. Partial prefills emit
//     nothing. With LongPrefillTokenThreshold > 0 (vLLM's
//     --long-prefill-token-threshold) no request computes more than that
//     many tokens in one step, so a long prompt next to running streams
//     delays each of their tokens by one threshold-sized chunk at most.
//   - With PrefillTokensBesideDecodes > 0 (Sluice's
//     --prefill-tokens-beside-decodes; vLLM has no equivalent), a step
//     that decodes running requests computes at most that many prompt
//     tokens in all, so a burst of prompts arriving while streams run
//     delays their tokens by that much prefill at most; a step without
//     decodes (an idle engine's first) still takes the whole budget.
//   - Concurrent partial prefills (vLLM's --max-num-partial-prefills P and
//     --max-long-partial-prefills L, off at P = 1): at most P requests
//     compute prompt tokens in one step, each at most MaxNumBatchedTokens
//     divided by the number of prefills that can run in it, and at most L
//     of them long (more than LongPrefillTokenThreshold prompt tokens
//     left); a shorter waiting prompt may then be admitted ahead of a long
//     one held back by L.
//   - A request is admitted only when KV blocks for its whole (remaining)
//     prompt are free (vLLM's scheduler_reserve_full_isl), but blocks are
//     allocated chunk by chunk.
//   - Preemption by recompute: when a running request needs a block and
//     none is free, the running request not yet scheduled in this step with
//     the worst (priority, arrival) — the newest, under equal priorities —
//     is preempted: its blocks are freed (they stay in the prefix cache),
//     its progress reset, and it goes back to the waiting queue, ahead of
//     everything that arrived after it. A request may preempt itself.
//     Requests whose worst case (prompt + max tokens) needs more blocks
//     than the cache holds are refused at Add, so a request alone always
//     fits and no workload deadlocks.
//   - Prefix caching: full blocks are committed to kvcache under chained
//     hashes once their KV is written (in Update, after the executor ran).
//     At admission the longest cached prefix is reused, capped so that at
//     least the last prompt token is recomputed (logits to sample from).
//   - Sliding-window layers (Config.SlidingWindow > 0, gpt-oss): every
//     request keeps a second block table, from the same pool, for the
//     layers that attend only to the last W positions (vLLM's hybrid KV
//     cache manager with a full and a sliding-window group). Before a step
//     computes positions [start, end), the window table gives back every
//     block wholly before start-W+1 (the entry becomes kvcache.NoBlock), so
//     a decoding request holds at most ceil(W/BlockSize)+1 window blocks
//     while its full table grows. Admission, the Add-time worst case and
//     preemption count both tables (KVBlocksFor). A prefix hit of k blocks
//     also needs the window group's blocks covering [k·bs-W+1, k·bs)
//     (committed under kvcache.WindowHash): the hit is shortened to the
//     longest k whose window blocks are all still cached.
//   - Token-level stops, checked after every sampled token: EOS (unless
//     ignore_eos) and stop_token_ids once min_tokens tokens exist; then
//     max_tokens and max_model_len (FinishLength). Stop strings are the
//     frontend's business.
//
// n>1 is not the scheduler's concern: the frontend sends n child requests.
package sched

import (
	"errors"
	"fmt"
	"slices"

	"github.com/sluice-llm/sluice/engine-core/internal/splitmix"

	"github.com/sluice-llm/sluice/engine-core/kvcache"
	"github.com/sluice-llm/sluice/engine-core/sample"
	"github.com/sluice-llm/sluice/ipc"
)

// MaxLogprobs is the largest top-logprobs count a request may ask for.
const MaxLogprobs = 20

// ErrInvalidRequest is wrapped by every error Add returns for a request
// that can never run (bad prompt, bad parameters, too long).
var ErrInvalidRequest = errors.New("sched: invalid request")

// Config are the scheduler's limits.
type Config struct {
	// MaxNumSeqs caps the number of running requests.
	MaxNumSeqs int
	// MaxNumBatchedTokens caps the tokens computed per step.
	MaxNumBatchedTokens int
	// MaxModelLen caps prompt + output tokens of one request.
	MaxModelLen int
	// VocabSize, when positive, bounds prompt token ids (checked at Add).
	VocabSize int
	// EOSTokenIDs are the model's end-of-sequence ids.
	EOSTokenIDs []int32
	// DisablePrefixCaching turns the prefix cache off.
	DisablePrefixCaching bool
	// Seed seeds the per-request seeds drawn for requests without one.
	Seed uint64
	// Guide, when set, enforces structured-output constraints; requests
	// with a Constraint are refused when it is nil.
	Guide Guide
	// LongPrefillTokenThreshold, when positive, caps the tokens one
	// request computes in a step (vLLM's --long-prefill-token-threshold),
	// and a request with more prompt tokens than that left is long (for
	// MaxLongPartialPrefills). 0: no cap; with MaxNumPartialPrefills > 1,
	// 0 becomes 4 % of MaxModelLen, as in vLLM.
	LongPrefillTokenThreshold int
	// PrefillTokensBesideDecodes, when positive, caps the prompt tokens
	// of a step that also decodes running requests (all requests
	// together). 0: no cap beyond MaxNumBatchedTokens.
	PrefillTokensBesideDecodes int
	// MaxNumPartialPrefills is the most requests computing prompt tokens
	// in one step when above 1 (vLLM's --max-num-partial-prefills); the
	// step's budget is then shared evenly between them. 0 or 1: no limit
	// beyond the token budget (vLLM's default).
	MaxNumPartialPrefills int
	// MaxLongPartialPrefills is the most long requests (see
	// LongPrefillTokenThreshold) computing prompt tokens in one step when
	// MaxNumPartialPrefills > 1 (vLLM's --max-long-partial-prefills;
	// 0 means 1).
	MaxLongPartialPrefills int
	// SlidingWindow, when positive, gives each request a second block
	// table (SeqWork.WindowTable) for the model's sliding-window layers,
	// which holds only the blocks those layers can still read: the last
	// SlidingWindow positions before the step's first token, and the
	// step's own. 0: one table serves every layer.
	SlidingWindow int
}

// KVBlocksFor is the most KV blocks one request with tokens KV positions
// holds at once: its full table, plus, with a sliding window, the window
// table's live blocks while it computes chunks of up to maxChunk tokens
// (the blocks covering the window before the chunk and the chunk itself,
// never more than the full table's).
func KVBlocksFor(tokens, blockSize, window, maxChunk int) int {
	full := (tokens + blockSize - 1) / blockSize
	if window <= 0 {
		return full
	}
	span := min(tokens, maxChunk) + window - 1
	return full + min(full, (span+blockSize-1)/blockSize+1)
}

// DefaultConfig returns vLLM's defaults for a small accelerator.
func DefaultConfig() Config {
	return Config{MaxNumSeqs: 256, MaxNumBatchedTokens: 2048, MaxModelLen: 4096}
}

// Validate checks the limits.
func (c *Config) Validate() error {
	switch {
	case c.MaxNumSeqs < 1:
		return fmt.Errorf("sched: MaxNumSeqs must be >= 1, got %d", c.MaxNumSeqs)
	case c.MaxNumBatchedTokens < 1:
		return fmt.Errorf("sched: MaxNumBatchedTokens must be >= 1, got %d", c.MaxNumBatchedTokens)
	case c.MaxModelLen < 2:
		return fmt.Errorf("sched: MaxModelLen must be >= 2, got %d", c.MaxModelLen)
	case c.SlidingWindow < 0:
		return fmt.Errorf("sched: SlidingWindow must be >= 0, got %d", c.SlidingWindow)
	case c.PrefillTokensBesideDecodes < 0:
		return fmt.Errorf("sched: PrefillTokensBesideDecodes must be >= 0, got %d", c.PrefillTokensBesideDecodes)
	case c.LongPrefillTokenThreshold < 0:
		return fmt.Errorf("sched: LongPrefillTokenThreshold must be >= 0, got %d", c.LongPrefillTokenThreshold)
	case c.MaxNumPartialPrefills < 0 || c.MaxLongPartialPrefills < 0:
		return fmt.Errorf("sched: MaxNumPartialPrefills and MaxLongPartialPrefills must be >= 0, got %d and %d", c.MaxNumPartialPrefills, c.MaxLongPartialPrefills)
	case max(c.MaxLongPartialPrefills, 1) > max(c.MaxNumPartialPrefills, 1):
		return fmt.Errorf("sched: MaxLongPartialPrefills (%d) must be <= MaxNumPartialPrefills (%d)", c.MaxLongPartialPrefills, c.MaxNumPartialPrefills)
	}
	return nil
}

type status uint8

const (
	statusWaiting status = iota
	statusRunning
	statusFinished
)

// request is the scheduler's mutable state of one request.
type request struct {
	id     string
	params ipc.SamplingParams
	// tokens is the prompt followed by the generated tokens. Entries are
	// never overwritten, so sub-slices handed out in outputs stay valid.
	tokens      []int32
	numPrompt   int
	numComputed int // tokens whose KV is written (or scheduled this step)
	maxOutput   int // effective max_tokens
	blocks      []int32
	hashes      []uint64 // chained hashes of full blocks, as far as known
	committed   int      // leading blocks committed to (or taken from) the prefix cache
	status      status
	priority    int32
	seq         uint64 // arrival order
	seed        uint64
	numCached   int32
	cachedSet   bool
	events      []ipc.Event
	mark        uint64  // step in which it was last scheduled
	matcher     Matcher // structured-output state, nil when unconstrained
	// win is the sliding-window table (Config.SlidingWindow > 0): as long
	// as blocks, with kvcache.NoBlock for the blocks given back; winLo is
	// the index of its first live entry.
	win   []int32
	winLo int
}

func (r *request) less(o *request) bool {
	if r.priority != o.priority {
		return r.priority < o.priority
	}
	return r.seq < o.seq
}

// Scheduler plans engine steps. Not safe for concurrent use.
type Scheduler struct {
	cfg Config
	kv  *kvcache.Pool
	bs  int

	reqs    map[string]*request
	waiting []*request // sorted by (priority, seq)
	running []*request // admission order
	seq     uint64
	rng     uint64

	batch    Batch
	work     []*request // work[i] is the request of batch.Seqs[i]
	released []string
	out      ipc.Output

	step        uint64
	preemptions int64
	generated   int64
	promptToks  int64
	finished    int64
}

// New returns a scheduler over the KV block pool kv. Zero limits in cfg
// take DefaultConfig's values.
func New(cfg Config, kv *kvcache.Pool) *Scheduler {
	def := DefaultConfig()
	if cfg.MaxNumSeqs <= 0 {
		cfg.MaxNumSeqs = def.MaxNumSeqs
	}
	if cfg.MaxNumBatchedTokens <= 0 {
		cfg.MaxNumBatchedTokens = def.MaxNumBatchedTokens
	}
	if cfg.MaxModelLen <= 1 {
		cfg.MaxModelLen = def.MaxModelLen
	}
	cfg.MaxNumPartialPrefills = max(cfg.MaxNumPartialPrefills, 1)
	cfg.MaxLongPartialPrefills = max(cfg.MaxLongPartialPrefills, 1)
	if cfg.MaxNumPartialPrefills > 1 && cfg.LongPrefillTokenThreshold <= 0 {
		cfg.LongPrefillTokenThreshold = max(cfg.MaxModelLen*4/100, 1) // vLLM's default when P > 1
	}
	return &Scheduler{
		cfg:  cfg,
		kv:   kv,
		bs:   kv.BlockSize(),
		reqs: make(map[string]*request),
		rng:  cfg.Seed ^ 0x5851f42d4c957f2d,
		work: make([]*request, 0, cfg.MaxNumSeqs),
		batch: Batch{
			Seqs: make([]SeqWork, 0, cfg.MaxNumSeqs),
		},
	}
}

// Config returns the scheduler's effective limits.
func (s *Scheduler) Config() Config { return s.cfg }

// KV returns the block pool.
func (s *Scheduler) KV() *kvcache.Pool { return s.kv }

// HasWork reports whether any request is waiting or running.
func (s *Scheduler) HasWork() bool { return len(s.waiting)+len(s.running) > 0 }

// Has reports whether request id is known and not finished.
func (s *Scheduler) Has(id string) bool { _, ok := s.reqs[id]; return ok }

// NumRunning and NumWaiting count requests by state.
func (s *Scheduler) NumRunning() int { return len(s.running) }

// NumWaiting counts waiting (including preempted) requests.
func (s *Scheduler) NumWaiting() int { return len(s.waiting) }

// WaitingFillsStep reports whether the waiting requests alone would fill
// the next step: they are at least MaxNumSeqs minus the running requests,
// their prompt tokens still to compute reach MaxNumBatchedTokens, or their
// prompts' KV blocks reach the free blocks. Prefix-cache hits are not
// counted, so it may answer true a little early. engine-core's arrival
// window (core.Options.IdleWait) stops waiting for more requests once it
// holds: another arrival could not join the first step.
func (s *Scheduler) WaitingFillsStep() bool {
	if len(s.waiting) == 0 {
		return false
	}
	if len(s.running)+len(s.waiting) >= s.cfg.MaxNumSeqs {
		return true
	}
	tokens, blocks := 0, 0
	for _, r := range s.waiting {
		tokens += s.capChunk(len(r.tokens) - r.numComputed)
		blocks += s.kv.BlocksFor(len(r.tokens))
	}
	return tokens >= s.cfg.MaxNumBatchedTokens || blocks >= s.kv.NumFree()
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidRequest}, args...)...)
}

// Add queues a request. The scheduler keeps req's slices (prompt, stop ids,
// …) without copying: the caller must not modify them afterwards. An error
// (wrapping ErrInvalidRequest) means the request was refused and is not
// queued; the caller reports it with FinishError.
func (s *Scheduler) Add(req *ipc.AddRequest, now float64) error {
	if req.RequestID == "" {
		return invalid("empty request id")
	}
	if _, dup := s.reqs[req.RequestID]; dup {
		return invalid("duplicate request id %q", req.RequestID)
	}
	n := len(req.PromptTokenIDs)
	if n == 0 {
		return invalid("request %s: empty prompt", req.RequestID)
	}
	if n >= s.cfg.MaxModelLen {
		return invalid("request %s: prompt has %d tokens, but max_model_len is %d (at least one output token must fit)", req.RequestID, n, s.cfg.MaxModelLen)
	}
	if s.cfg.VocabSize > 0 {
		for _, t := range req.PromptTokenIDs {
			if t < 0 || int(t) >= s.cfg.VocabSize {
				return invalid("request %s: prompt token id %d out of range [0, %d)", req.RequestID, t, s.cfg.VocabSize)
			}
		}
	}
	p := &req.Params
	switch {
	case p.Temperature < 0:
		return invalid("request %s: temperature %g < 0", req.RequestID, p.Temperature)
	case p.TopP < 0 || p.TopP > 1:
		return invalid("request %s: top_p %g outside (0, 1]", req.RequestID, p.TopP)
	case p.MinP < 0 || p.MinP > 1:
		return invalid("request %s: min_p %g outside [0, 1]", req.RequestID, p.MinP)
	case p.RepetitionPenalty < 0:
		return invalid("request %s: repetition_penalty %g < 0", req.RequestID, p.RepetitionPenalty)
	case p.MaxTokens < 0:
		return invalid("request %s: max_tokens %d < 0", req.RequestID, p.MaxTokens)
	case p.MinTokens < 0:
		return invalid("request %s: min_tokens %d < 0", req.RequestID, p.MinTokens)
	case p.MaxTokens > 0 && p.MinTokens > p.MaxTokens:
		return invalid("request %s: min_tokens %d > max_tokens %d", req.RequestID, p.MinTokens, p.MaxTokens)
	case p.Logprobs > MaxLogprobs:
		return invalid("request %s: logprobs %d > %d", req.RequestID, p.Logprobs, MaxLogprobs)
	}
	maxOut := s.cfg.MaxModelLen - n
	if p.MaxTokens > 0 && int(p.MaxTokens) < maxOut {
		maxOut = int(p.MaxTokens)
	}
	// The last sampled token is never computed, so the KV holds at most
	// n+maxOut-1 positions.
	worst := KVBlocksFor(n+maxOut-1, s.bs, s.cfg.SlidingWindow, s.cfg.MaxNumBatchedTokens)
	if worst > s.kv.NumBlocks() {
		return invalid("request %s: %d prompt + %d output tokens need %d KV blocks, the cache holds %d (lower max_tokens or raise the KV cache size)",
			req.RequestID, n, maxOut, worst, s.kv.NumBlocks())
	}
	fullWorst := s.kv.BlocksFor(n + maxOut - 1)
	var matcher Matcher
	if c := p.Constraint; c != nil {
		if s.cfg.Guide == nil {
			return invalid("request %s: structured outputs (%s) are not supported by this engine", req.RequestID, c.Kind)
		}
		m, err := s.cfg.Guide.NewMatcher(c)
		if err != nil {
			return invalid("request %s: constraint: %v", req.RequestID, err)
		}
		matcher = m
	}
	r := &request{
		matcher:   matcher,
		id:        req.RequestID,
		params:    req.Params,
		numPrompt: n,
		maxOutput: maxOut,
		priority:  req.Priority,
		seq:       s.seq,
		blocks:    make([]int32, 0, fullWorst),
		events:    []ipc.Event{{Type: ipc.EventQueued, Timestamp: now}},
	}
	s.seq++
	if p.HasSeed {
		r.seed = uint64(p.Seed)
	} else {
		s.rng += 0x9e3779b97f4a7c15
		r.seed = splitmix.Mix(s.rng)
	}
	r.tokens = make([]int32, n, n+min(maxOut, 1024))
	copy(r.tokens, req.PromptTokenIDs)
	if !s.cfg.DisablePrefixCaching {
		r.hashes = kvcache.AppendHashes(make([]uint64, 0, fullWorst+1), r.tokens, s.bs)
	}
	if s.cfg.SlidingWindow > 0 {
		r.win = make([]int32, 0, fullWorst)
	}
	s.reqs[r.id] = r
	s.enqueue(r)
	return nil
}

// enqueue inserts r into the waiting queue in (priority, seq) order.
func (s *Scheduler) enqueue(r *request) {
	r.status = statusWaiting
	i, _ := slices.BinarySearchFunc(s.waiting, r, func(a, b *request) int {
		if a.less(b) {
			return -1
		}
		if b.less(a) {
			return 1
		}
		return 0
	})
	s.waiting = slices.Insert(s.waiting, i, r)
}

// Abort ends request id without an output (the frontend asked for it or is
// gone). It is idempotent: unknown and finished ids are ignored. It reports
// whether the request was live. Abort must not be called between Schedule
// and Update of one step.
func (s *Scheduler) Abort(id string) bool {
	r, ok := s.reqs[id]
	if !ok {
		return false
	}
	switch r.status {
	case statusWaiting:
		if i := slices.Index(s.waiting, r); i >= 0 {
			s.waiting = slices.Delete(s.waiting, i, i+1)
		}
	case statusRunning:
		if i := slices.Index(s.running, r); i >= 0 {
			s.running = slices.Delete(s.running, i, i+1)
		}
	}
	s.finish(r)
	return true
}

// freeBlocks gives back both of r's block tables.
func (s *Scheduler) freeBlocks(r *request) {
	s.kv.Free(r.win)
	r.win, r.winLo = r.win[:0], 0
	s.kv.Free(r.blocks)
	r.blocks = r.blocks[:0]
}

// finish frees r's blocks and forgets it.
func (s *Scheduler) finish(r *request) {
	if len(r.blocks) > 0 {
		s.freeBlocks(r)
		s.released = append(s.released, r.id)
	}
	r.status = statusFinished
	delete(s.reqs, r.id)
	s.finished++
}

// DrainReleased calls fn with the id of every request that finished or was
// preempted since the last call, so the executor can drop per-request
// state, then forgets them.
func (s *Scheduler) DrainReleased(fn func(id string)) {
	for i, id := range s.released {
		fn(id)
		s.released[i] = ""
	}
	s.released = s.released[:0]
}

// Schedule plans one step at time now. The returned batch (and its slices)
// is reused by the next call; it is valid until then. A batch with no Seqs
// means there is nothing to compute.
func (s *Scheduler) Schedule(now float64) *Batch {
	s.step++
	b := &s.batch
	b.Step = s.step
	for i := range b.Seqs {
		b.Seqs[i] = SeqWork{}
	}
	b.Seqs = b.Seqs[:0]
	b.NumTokens = 0
	clear(s.work)
	s.work = s.work[:0]
	budget := s.cfg.MaxNumBatchedTokens
	preemptions := s.preemptions
	pp := s.planPrefills()

	// Running requests: decodes first, then prefill chunks.
	for pass := 0; pass < 2 && budget > 0; pass++ {
		if pass == 1 && len(b.Seqs) > 0 && s.cfg.PrefillTokensBesideDecodes > 0 {
			budget = min(budget, s.cfg.PrefillTokensBesideDecodes)
		}
		for _, r := range s.running {
			if budget == 0 {
				break
			}
			if r.status != statusRunning || r.mark == s.step {
				continue
			}
			remaining := len(r.tokens) - r.numComputed
			if remaining <= 0 || (remaining == 1) != (pass == 0) {
				continue
			}
			n := min(s.capChunk(remaining), budget)
			if pass == 1 {
				n = min(n, pp.slot)
				pp.count(s.isLong(r))
			}
			if !s.ensureBlocks(r, r.numComputed+n, now) {
				continue
			}
			if r.status != statusRunning {
				continue
			}
			s.schedule(r, n)
			budget -= n
		}
	}
	// ensureBlocks may have preempted r or other running requests (a
	// victim can be preempted while r itself gets its blocks).
	if s.preemptions != preemptions {
		s.running = slices.DeleteFunc(s.running, func(r *request) bool { return r.status != statusRunning })
		return b
	}

	// Waiting requests, in order, while they fit. With concurrent partial
	// prefills on, a long request held back by MaxLongPartialPrefills is
	// passed over (it keeps its place) and a shorter one behind it may
	// start.
	for i := 0; i < len(s.waiting) && budget > 0 && len(s.running) < s.cfg.MaxNumSeqs; {
		r := s.waiting[i]
		long := s.isLong(r)
		if !pp.admits(long) {
			if pp.full() {
				break
			}
			i++
			continue
		}
		cachedBlocks := 0
		if !s.cfg.DisablePrefixCaching {
			cachedBlocks = s.acquirePrefix(r)
		}
		cached := cachedBlocks * s.bs
		n := min(s.capChunk(len(r.tokens)-cached), budget, pp.slot)
		// the whole prompt's full blocks, and the most window blocks its
		// prefill chunks hold at once
		if s.kv.NumFree() < s.kv.BlocksFor(len(r.tokens))-cachedBlocks+s.windowReserve(r, cached) {
			s.freeBlocks(r)
			break
		}
		if !s.allocate(r, cached, cached+n) { // cannot happen after the check above; stay safe
			s.freeBlocks(r)
			break
		}
		if !s.cfg.DisablePrefixCaching {
			s.kv.RecordLookup(len(r.tokens), cached)
		}
		if !r.cachedSet {
			r.numCached = int32(cached)
			r.cachedSet = true
		}
		r.numComputed = cached
		r.committed = cachedBlocks
		s.waiting = slices.Delete(s.waiting, i, i+1)
		r.status = statusRunning
		s.running = append(s.running, r)
		r.events = append(r.events, ipc.Event{Type: ipc.EventScheduled, Timestamp: now})
		s.schedule(r, n)
		pp.count(long)
		budget -= n
	}
	return b
}

// capChunk caps a request's tokens for one step at
// LongPrefillTokenThreshold (when positive).
func (s *Scheduler) capChunk(remaining int) int {
	if t := s.cfg.LongPrefillTokenThreshold; t > 0 && remaining > t {
		return t
	}
	return remaining
}

// isLong reports whether r has more prompt tokens left than
// LongPrefillTokenThreshold (vLLM counts the tokens not computed yet,
// before any prefix-cache hit).
func (s *Scheduler) isLong(r *request) bool {
	t := s.cfg.LongPrefillTokenThreshold
	return t > 0 && len(r.tokens)-r.numComputed > t
}

// prefillPlan is one step's limits on prefill chunks under concurrent
// partial prefills (Config.MaxNumPartialPrefills > 1). With the feature
// off its slot is unbounded and it admits everything.
type prefillPlan struct {
	on             bool
	slot           int // most tokens of one prefill chunk
	maxN, maxLong  int
	prefills, long int // prefills (long ones) in the step so far
}

// planPrefills sets the step's prefill slot as vLLM does: the step's
// budget divided by the prefills that can run in it, i.e. the running
// requests still in prefill, then waiting requests in order, up to
// MaxNumPartialPrefills, skipping long ones past MaxLongPartialPrefills.
func (s *Scheduler) planPrefills() prefillPlan {
	p := prefillPlan{slot: s.cfg.MaxNumBatchedTokens, maxN: s.cfg.MaxNumPartialPrefills, maxLong: s.cfg.MaxLongPartialPrefills}
	if p.maxN <= 1 {
		return p
	}
	p.on = true
	n, long := 0, 0
	for _, r := range s.running {
		if len(r.tokens)-r.numComputed > 1 {
			n++
			if s.isLong(r) {
				long++
			}
		}
	}
	for _, r := range s.waiting {
		if n >= p.maxN {
			break
		}
		if s.isLong(r) {
			if long >= p.maxLong {
				continue
			}
			long++
		}
		n++
	}
	if n = min(n, p.maxN); n > 0 {
		p.slot = max(s.cfg.MaxNumBatchedTokens/n, 1)
	}
	return p
}

// count records a prefill (long or not) scheduled in the step.
func (p *prefillPlan) count(long bool) {
	p.prefills++
	if long {
		p.long++
	}
}

// full reports whether no further prefill may start in the step.
func (p *prefillPlan) full() bool { return p.on && p.prefills >= p.maxN }

// admits reports whether a waiting request (long or not) may start.
func (p *prefillPlan) admits(long bool) bool {
	return !p.on || (p.prefills < p.maxN && (!long || p.long < p.maxLong))
}

// extendHashes hashes the full blocks of r's tokens not hashed yet.
func (s *Scheduler) extendHashes(r *request) {
	if len(r.hashes) < len(r.tokens)/s.bs {
		r.hashes = kvcache.AppendHashes(r.hashes, r.tokens, s.bs)
	}
}

// acquirePrefix takes r's longest usable cached prefix (both groups'
// blocks) and returns its length in blocks. The last prompt token is
// always recomputed. With a sliding window, a prefix of k blocks is usable
// only when the window blocks covering [k·bs-W+1, k·bs) are cached too.
func (s *Scheduler) acquirePrefix(r *request) int {
	s.extendHashes(r)
	maxBlocks := min((len(r.tokens)-1)/s.bs, len(r.hashes))
	k := s.kv.Match(r.hashes[:maxBlocks])
	if s.cfg.SlidingWindow > 0 {
		for k > 0 && !s.windowCached(r, k) {
			k--
		}
	}
	r.blocks = s.kv.Acquire(r.hashes, k, r.blocks[:0])
	if s.cfg.SlidingWindow > 0 {
		lo := s.windowFirst(k * s.bs)
		r.win, r.winLo = r.win[:0], lo
		for i := 0; i < k; i++ {
			id := kvcache.NoBlock
			if i >= lo {
				id = s.kv.AcquireOne(kvcache.WindowHash(r.hashes[i]))
			}
			r.win = append(r.win, id)
		}
	}
	return k
}

// windowCached reports whether the window blocks a request resuming at
// block k reads are all in the prefix cache.
func (s *Scheduler) windowCached(r *request, k int) bool {
	for i := s.windowFirst(k * s.bs); i < k; i++ {
		if !s.kv.Has(kvcache.WindowHash(r.hashes[i])) {
			return false
		}
	}
	return true
}

// windowFirst is the first window-table block a step starting at position
// start reads: the block of start-W+1.
func (s *Scheduler) windowFirst(start int) int {
	return max(0, start-s.cfg.SlidingWindow+1) / s.bs
}

// trimWindow gives back r's window blocks wholly before the window of a
// step starting at position start.
func (s *Scheduler) trimWindow(r *request, start int) {
	lo := min(s.windowFirst(start), len(r.win))
	for ; r.winLo < lo; r.winLo++ {
		s.kv.Free(r.win[r.winLo : r.winLo+1])
		r.win[r.winLo] = kvcache.NoBlock
	}
}

// windowNeed is the number of window blocks r must allocate to compute
// positions [start, end) (0 without a sliding window).
func (s *Scheduler) windowNeed(r *request, start, end int) int {
	if s.cfg.SlidingWindow <= 0 {
		return 0
	}
	need := s.kv.BlocksFor(end) - max(len(r.win), s.windowFirst(start))
	return max(need, 0)
}

// windowReserve is the number of window blocks, beyond those r took from
// the prefix cache, that computing r's tokens from position cached on may
// hold at once (0 without a sliding window).
func (s *Scheduler) windowReserve(r *request, cached int) int {
	if s.cfg.SlidingWindow <= 0 {
		return 0
	}
	n := len(r.tokens)
	span := min(n-cached, s.cfg.MaxNumBatchedTokens) + s.cfg.SlidingWindow - 1
	peak := min(s.kv.BlocksFor(n)-s.windowFirst(cached), s.kv.BlocksFor(span)+1)
	held := 0
	for _, id := range r.win {
		if id != kvcache.NoBlock {
			held++
		}
	}
	return max(peak-held, s.windowNeed(r, cached, cached+min(n-cached, s.cfg.MaxNumBatchedTokens)))
}

// allocate gives r the blocks of both tables for positions [start, end),
// all or nothing; entries of the window table before the window are
// NoBlock.
func (s *Scheduler) allocate(r *request, start, end int) bool {
	needFull := max(0, s.kv.BlocksFor(end)-len(r.blocks))
	needWin := s.windowNeed(r, start, end)
	if needFull+needWin > s.kv.NumFree() {
		return false
	}
	r.blocks, _ = s.kv.Allocate(needFull, r.blocks)
	if s.cfg.SlidingWindow > 0 {
		for lo := s.windowFirst(start); len(r.win) < lo; {
			r.win = append(r.win, kvcache.NoBlock)
		}
		r.win, _ = s.kv.Allocate(needWin, r.win)
	}
	return true
}

// ensureBlocks gives r blocks for total token positions, preempting other
// running requests (or r itself) when the pool runs dry. It reports false
// when r was preempted.
func (s *Scheduler) ensureBlocks(r *request, total int, now float64) bool {
	if s.cfg.SlidingWindow > 0 {
		s.trimWindow(r, r.numComputed)
	}
	for {
		if s.kv.BlocksFor(total) <= len(r.blocks) && s.windowNeed(r, r.numComputed, total) == 0 {
			return true
		}
		if s.allocate(r, r.numComputed, total) {
			return true
		}
		victim := r
		for _, o := range s.running {
			if o.status == statusRunning && o.mark != s.step && victim.less(o) {
				victim = o
			}
		}
		s.preempt(victim, now)
		if victim == r {
			return false
		}
	}
}

// preempt frees r's blocks and puts it back in the waiting queue.
func (s *Scheduler) preempt(r *request, now float64) {
	s.freeBlocks(r)
	r.numComputed = 0
	r.committed = 0
	r.events = append(r.events, ipc.Event{Type: ipc.EventPreempted, Timestamp: now})
	s.released = append(s.released, r.id)
	s.preemptions++
	s.enqueue(r)
}

// schedule adds n tokens of r to the batch.
func (s *Scheduler) schedule(r *request, n int) {
	start := r.numComputed
	r.numComputed += n
	r.mark = s.step
	if start < r.numPrompt {
		s.promptToks += int64(min(r.numComputed, r.numPrompt) - start)
	}
	sampleNow := r.numComputed == len(r.tokens)
	var mask sample.Mask
	if sampleNow && r.matcher != nil {
		mask = r.matcher.Mask()
	}
	s.batch.Seqs = append(s.batch.Seqs, SeqWork{
		ReqID:       r.id,
		Tokens:      r.tokens[start:r.numComputed:r.numComputed],
		StartPos:    start,
		BlockTable:  r.blocks,
		WindowTable: r.win,
		Sample:      sampleNow,
		In: sample.Input{
			Params:    &r.params,
			History:   r.tokens[:r.numComputed:r.numComputed],
			NumPrompt: r.numPrompt,
			Seed:      r.seed,
			EOS:       s.cfg.EOSTokenIDs,
			Mask:      mask,
		},
	})
	s.batch.NumTokens += n
	s.work = append(s.work, r)
}

// Update applies the executor's results for batch b (sampled[i] belongs to
// b.Seqs[i]) at time now and calls emit once per request with news: a new
// token, possibly with a finish reason. The *ipc.Output passed to emit is
// reused after emit returns, but the slices it holds (NewTokenIDs, Events,
// Logprobs) are never modified again by the scheduler, so emit may keep
// them (copy the struct, not the slices).
func (s *Scheduler) Update(b *Batch, sampled []sample.Result, now float64, emit func(*ipc.Output)) {
	anyFinished := false
	for i := range b.Seqs {
		if i >= len(s.work) {
			break
		}
		r := s.work[i]
		if r.status != statusRunning {
			continue // aborted since Schedule
		}
		s.commitBlocks(r)
		if !b.Seqs[i].Sample {
			continue
		}
		if i >= len(sampled) {
			s.fail(r, "executor returned no token", emit)
			anyFinished = true
			continue
		}
		res := &sampled[i]
		tok := res.Token
		r.tokens = append(r.tokens, tok)
		s.generated++
		nOut := len(r.tokens) - r.numPrompt
		if nOut == 1 {
			r.events = append(r.events, ipc.Event{Type: ipc.EventFirstToken, Timestamp: now})
		}
		finish, stopReason := ipc.FinishNone, int32(-1)
		if nOut >= int(r.params.MinTokens) {
			if !r.params.IgnoreEOS && slices.Contains(s.cfg.EOSTokenIDs, tok) {
				finish = ipc.FinishStop
			} else if slices.Contains(r.params.StopTokenIDs, tok) {
				finish, stopReason = ipc.FinishStop, tok
			}
		}
		errMsg := ""
		if r.matcher != nil && finish == ipc.FinishNone {
			if err := r.matcher.Accept(tok); err != nil {
				finish, errMsg = ipc.FinishError, "structured output: "+err.Error()
			} else if r.matcher.IsDone() {
				finish = ipc.FinishStop
			}
		}
		if finish == ipc.FinishNone && (nOut >= r.maxOutput || len(r.tokens) >= s.cfg.MaxModelLen) {
			finish = ipc.FinishLength
		}
		n := len(r.tokens)
		o := &s.out
		*o = ipc.Output{
			RequestID:       r.id,
			NewTokenIDs:     r.tokens[n-1 : n : n],
			FinishReason:    finish,
			StopReason:      stopReason,
			Events:          r.events,
			NumCachedTokens: r.numCached,
			Error:           errMsg,
		}
		r.events = nil
		if r.params.Logprobs >= 0 {
			lp := res.Logprobs
			lp.TopIDs = slices.Clone(lp.TopIDs)
			lp.TopLogprobs = slices.Clone(lp.TopLogprobs)
			o.Logprobs = []ipc.TokenLogprobs{lp}
		}
		if finish != ipc.FinishNone {
			s.finish(r)
			anyFinished = true
		}
		emit(o)
	}
	if anyFinished {
		s.running = slices.DeleteFunc(s.running, func(r *request) bool { return r.status != statusRunning })
	}
}

// fail ends r with FinishError.
func (s *Scheduler) fail(r *request, msg string, emit func(*ipc.Output)) {
	o := &s.out
	*o = ipc.Output{
		RequestID:       r.id,
		FinishReason:    ipc.FinishError,
		StopReason:      -1,
		Events:          r.events,
		NumCachedTokens: r.numCached,
		Error:           msg,
	}
	r.events = nil
	s.finish(r)
	emit(o)
}

// FailBatch ends every request of batch b with FinishError and message msg
// (the executor failed). Use it instead of Update for that step.
func (s *Scheduler) FailBatch(b *Batch, msg string, emit func(*ipc.Output)) {
	for i := range b.Seqs {
		if i < len(s.work) && s.work[i].status == statusRunning {
			s.fail(s.work[i], msg, emit)
		}
	}
	s.running = slices.DeleteFunc(s.running, func(r *request) bool { return r.status != statusRunning })
}

// commitBlocks publishes r's fully computed blocks to the prefix cache.
func (s *Scheduler) commitBlocks(r *request) {
	if s.cfg.DisablePrefixCaching {
		return
	}
	full := r.numComputed / s.bs
	if r.committed >= full {
		return
	}
	if len(r.hashes) < full {
		r.hashes = kvcache.AppendHashes(r.hashes, r.tokens[:r.numComputed], s.bs)
	}
	for ; r.committed < full; r.committed++ {
		h := r.hashes[r.committed]
		s.kv.Commit(r.blocks[r.committed], h)
		if r.committed < len(r.win) && r.win[r.committed] != kvcache.NoBlock {
			s.kv.Commit(r.win[r.committed], kvcache.WindowHash(h))
		}
	}
}

// ResetPrefixCache forgets every cached block (the reset_prefix_cache
// utility call) and returns how many were dropped.
func (s *Scheduler) ResetPrefixCache() int { return s.kv.Reset() }

// Stats returns the scheduler's counters. StepTimeMicros and
// RunningByFrontend are left for the caller to fill.
func (s *Scheduler) Stats() ipc.SchedulerStats {
	st := s.kv.Stats()
	return ipc.SchedulerStats{
		Running:          int32(len(s.running)),
		Waiting:          int32(len(s.waiting)),
		KVUsage:          st.Usage,
		NumKVBlocks:      int32(st.NumBlocks),
		PrefixQueries:    st.Queries,
		PrefixHits:       st.Hits,
		Preemptions:      s.preemptions,
		StepCount:        s.step,
		GeneratedTokens:  s.generated,
		PromptTokens:     s.promptToks,
		FinishedRequests: s.finished,
	}
}
