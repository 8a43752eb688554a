// Package ipc holds the wire vocabulary shared by engine-core and api-frontend:
// the message types of every frame, the frame kinds, and their msgpack codec.
//
// It is the only package both programs share (ARCHITECTURE.md), which makes
// the process boundary a compile-time fact. It imports nothing of Sluice's.
// PROTOCOL.md beside this file documents every frame.
//
// Frames are [kind byte][msgpack body]. Structs are encoded as positional
// msgpack arrays. The library's reflection path costs ~1.5 ms per 1024-output
// batch here, so the hot types (AddRequest, Outputs, Output, SamplingParams,
// TokenLogprobs, SchedulerStats) have hand-written EncodeMsgpack/DecodeMsgpack
// methods on vmihailenco/msgpack's low-level Encoder/Decoder, and the per-step
// message (Outputs) additionally has a slice-based codec on tinylib/msgp's
// runtime primitives that Codec uses: same bytes, zero allocations, about half
// the CPU (see docs/BENCHMARKS.md).
// Decoders accept shorter arrays (missing trailing fields keep their zero
// value) and skip extra trailing fields, so the protocol can grow at the end.
package ipc

// ProtocolVersion is checked at the HELLO/READY handshake; peers with a
// different version are refused.
const ProtocolVersion = 1

// Kind is the first byte of every frame.
type Kind byte

// Frame kinds.
const (
	KindHello         Kind = 1  // frontend → engine: Hello
	KindReady         Kind = 2  // engine → frontend: Ready
	KindAdd           Kind = 3  // frontend → engine: AddRequest
	KindAbort         Kind = 4  // frontend → engine: Abort
	KindOutputs       Kind = 5  // engine → frontend: Outputs
	KindUtility       Kind = 6  // both: Utility
	KindUtilityResult Kind = 7  // both: UtilityResult
	KindPing          Kind = 8  // both: Ping
	KindPong          Kind = 9  // both: Ping (echoed)
	KindShutdown      Kind = 10 // engine → frontend: Shutdown
	KindReject        Kind = 11 // engine → frontend: Reject (HELLO refused)
)

// String names the kind for logs.
func (k Kind) String() string {
	switch k {
	case KindHello:
		return "HELLO"
	case KindReady:
		return "READY"
	case KindAdd:
		return "ADD"
	case KindAbort:
		return "ABORT"
	case KindOutputs:
		return "OUTPUTS"
	case KindUtility:
		return "UTILITY"
	case KindUtilityResult:
		return "UTILITY_RESULT"
	case KindPing:
		return "PING"
	case KindPong:
		return "PONG"
	case KindShutdown:
		return "SHUTDOWN"
	case KindReject:
		return "REJECT"
	}
	return "UNKNOWN"
}

// Hello opens a frontend's session with the engine.
type Hello struct {
	_msgpack        struct{} `msgpack:",as_array"`
	ProtocolVersion int
	FrontendID      string
	PID             int
	// ModelName, when not empty, is the model the frontend expects; an engine
	// serving another model answers with Reject.
	ModelName string
	// Session identifies one connection of one frontend process (random,
	// chosen at dial). A HELLO carrying the session the engine already has
	// for this frontend resumes its requests; any other HELLO aborts them.
	// Empty (an older frontend): every HELLO aborts them.
	Session string
}

// Ready answers Hello with the facts a frontend needs about the engine.
type Ready struct {
	_msgpack        struct{} `msgpack:",as_array"`
	ProtocolVersion int
	EngineID        string
	ModelName       string
	MaxModelLen     int
	VocabSize       int
	EOSTokenIDs     []int32
	BlockSize       int
	NumKVBlocks     int
	PID             int
	// ModelFingerprint changes when the engine's weights change (a restart
	// with another model); frontends compare it across reconnects.
	ModelFingerprint string
}

// Reject refuses a Hello (protocol version or model mismatch).
type Reject struct {
	_msgpack struct{} `msgpack:",as_array"`
	Reason   string
}

// LogitBias is one entry of a request's logit_bias map.
type LogitBias struct {
	Token int32
	Bias  float32
}

// Constraint is a compiled structured-output constraint, canonical across
// frontends: Kind is "json_schema", "regex", "choice", "grammar" or
// "json_object"; Spec its canonical text; Hash a digest of both.
type Constraint struct {
	Kind string
	Spec string
	Hash string
	// AfterReasoning delays the constraint until the reasoning end marker.
	AfterReasoning bool
}

// SamplingParams are a request's sampling and stopping parameters.
// Zero values mean "off" except where noted (Temperature 0 is greedy;
// TopP 0 means 1; TopK 0 means no limit; RepetitionPenalty 0 means 1).
type SamplingParams struct {
	Temperature       float32
	TopP              float32
	TopK              int32
	MinP              float32
	HasSeed           bool
	Seed              int64
	MaxTokens         int32 // 0: up to max_model_len
	MinTokens         int32
	StopTokenIDs      []int32
	IgnoreEOS         bool
	PresencePenalty   float32
	FrequencyPenalty  float32
	RepetitionPenalty float32
	LogitBias         []LogitBias
	AllowedTokenIDs   []int32
	BadWords          [][]int32
	// Logprobs is the number of top logprobs to return per token; -1 none,
	// 0 the sampled token's logprob only.
	Logprobs   int32
	Constraint *Constraint
}

// AddRequest asks the engine to start generating for a request.
type AddRequest struct {
	RequestID      string
	PromptTokenIDs []int32
	Params         SamplingParams
	ArrivalTime    float64 // unix seconds, frontend clock
	Priority       int32   // lower is served first
}

// Abort cancels requests; unknown or finished ids are ignored (idempotent).
type Abort struct {
	_msgpack   struct{} `msgpack:",as_array"`
	RequestIDs []string
}

// FinishReason says why a request ended.
type FinishReason uint8

// Finish reasons.
const (
	FinishNone   FinishReason = 0 // still running
	FinishStop   FinishReason = 1 // EOS or a stop token
	FinishLength FinishReason = 2 // max_tokens or max_model_len
	FinishAbort  FinishReason = 3 // aborted by the frontend
	FinishError  FinishReason = 4 // failed in the engine; see Output.Error
)

// String is the OpenAI spelling ("stop", "length", "abort", "error").
func (f FinishReason) String() string {
	switch f {
	case FinishStop:
		return "stop"
	case FinishLength:
		return "length"
	case FinishAbort:
		return "abort"
	case FinishError:
		return "error"
	}
	return ""
}

// EventType names a request lifecycle event.
type EventType uint8

// Event types.
const (
	EventQueued     EventType = 1
	EventScheduled  EventType = 2
	EventFirstToken EventType = 3
	EventPreempted  EventType = 4
)

// Event is a lifecycle event with the engine's timestamp (unix seconds).
type Event struct {
	Type      EventType
	Timestamp float64
}

// TokenLogprobs are the logprobs of one generated token.
type TokenLogprobs struct {
	Logprob     float32 // of the sampled token
	Rank        int32   // 1-based rank of the sampled token
	TopIDs      []int32
	TopLogprobs []float32
}

// Output is one request's news from one engine step.
type Output struct {
	RequestID       string
	NewTokenIDs     []int32
	Logprobs        []TokenLogprobs // one per new token when requested
	FinishReason    FinishReason
	StopReason      int32 // the stop token id, or -1
	Events          []Event
	NumCachedTokens int32 // prompt tokens served from the prefix cache
	Error           string
}

// SchedulerStats summarise the engine's state; attached to a batch every few
// steps (and whenever they change materially).
type SchedulerStats struct {
	Running           int32
	Waiting           int32
	KVUsage           float32 // fraction of KV blocks in use, 0..1
	NumKVBlocks       int32
	PrefixQueries     int64 // cumulative prompt tokens looked up in the prefix cache
	PrefixHits        int64 // cumulative prompt tokens found
	Preemptions       int64 // cumulative
	StepCount         uint64
	GeneratedTokens   int64 // cumulative
	PromptTokens      int64 // cumulative computed prompt tokens
	StepTimeMicros    int64 // duration of the last step
	FinishedRequests  int64 // cumulative
	RunningByFrontend int32 // running requests of the receiving frontend
}

// Outputs is one step's batch of outputs for one frontend.
type Outputs struct {
	EngineID  string
	Step      uint64
	Timestamp float64
	Outputs   []Output
	Stats     *SchedulerStats
}

// Utility is a call to a named engine method (reset_prefix_cache, stats, …).
type Utility struct {
	_msgpack struct{} `msgpack:",as_array"`
	CallID   uint64
	Method   string
	Args     []byte // msgpack-encoded arguments, method specific
}

// UtilityResult answers a Utility call.
type UtilityResult struct {
	_msgpack struct{} `msgpack:",as_array"`
	CallID   uint64
	Result   []byte // msgpack-encoded result
	Error    string
}

// Ping is a liveness beat; the peer answers with the same body as KindPong.
type Ping struct {
	_msgpack struct{} `msgpack:",as_array"`
	Time     float64
}

// Shutdown tells frontends the engine is stopping.
type Shutdown struct {
	_msgpack struct{} `msgpack:",as_array"`
	Reason   string
}
