package core

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
	"go.uber.org/goleak"

	"github.com/sluice-llm/sluice/engine-core/kvcache"
	"github.com/sluice-llm/sluice/engine-core/sched"
	"github.com/sluice-llm/sluice/engine-core/simexec"
	"github.com/sluice-llm/sluice/ipc"
	"github.com/sluice-llm/sluice/ipc/zmqtransport"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeTransport is a Transport over channels.
type fakeTransport struct {
	in      chan zmqtransport.Inbound
	mu      sync.Mutex
	outs    map[string][]*ipc.Outputs
	utils   chan *ipc.UtilityResult
	closed  chan string
	changed chan struct{}
	// clock, when set, stamps every output batch (stamps[fe][i] is the
	// time of outs[fe][i]).
	clock  func() time.Time
	stamps map[string][]time.Time
}

func newFake() *fakeTransport {
	return &fakeTransport{
		in:      make(chan zmqtransport.Inbound, 1024),
		outs:    map[string][]*ipc.Outputs{},
		utils:   make(chan *ipc.UtilityResult, 16),
		closed:  make(chan string, 1),
		changed: make(chan struct{}, 1),
	}
}

func (f *fakeTransport) Inbound() <-chan zmqtransport.Inbound { return f.in }
func (f *fakeTransport) SendOutputs(fe string, o *ipc.Outputs) {
	f.mu.Lock()
	f.outs[fe] = append(f.outs[fe], o)
	if f.clock != nil {
		if f.stamps == nil {
			f.stamps = map[string][]time.Time{}
		}
		f.stamps[fe] = append(f.stamps[fe], f.clock())
	}
	f.mu.Unlock()
	select {
	case f.changed <- struct{}{}:
	default:
	}
}
func (f *fakeTransport) SendUtilityResult(fe string, r *ipc.UtilityResult) { f.utils <- r }
func (f *fakeTransport) Close(reason string)                               { f.closed <- reason }

// requests summarises what a frontend received per request.
type reqView struct {
	tokens  []int32
	finish  ipc.FinishReason
	errMsg  string
	outputs int
	after   int // outputs after the finishing one
}

func (f *fakeTransport) view(fe string) map[string]*reqView {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := map[string]*reqView{}
	for _, batch := range f.outs[fe] {
		for _, o := range batch.Outputs {
			v := m[o.RequestID]
			if v == nil {
				v = &reqView{}
				m[o.RequestID] = v
			}
			if v.finish != ipc.FinishNone {
				v.after++
			}
			v.outputs++
			v.tokens = append(v.tokens, o.NewTokenIDs...)
			if o.FinishReason != ipc.FinishNone {
				v.finish = o.FinishReason
				v.errMsg = o.Error
			}
		}
	}
	return m
}

// waitFor polls cond until it holds or the test times out.
func (f *fakeTransport) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for !cond() {
		select {
		case <-f.changed:
		case <-time.After(5 * time.Millisecond):
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func (f *fakeTransport) stats(t *testing.T) ipc.SchedulerStats {
	t.Helper()
	f.in <- zmqtransport.Inbound{Frontend: "probe", Kind: ipc.KindUtility, Utility: &ipc.Utility{CallID: 1, Method: MethodStats}}
	r := <-f.utils
	if r.Error != "" {
		t.Fatal(r.Error)
	}
	var st ipc.SchedulerStats
	if err := msgpack.Unmarshal(r.Result, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

type setup struct {
	tr     *fakeTransport
	cancel context.CancelFunc
	done   chan error
}

func start(t *testing.T, blocks int, drain time.Duration) *setup {
	t.Helper()
	pool := kvcache.New(blocks, 16)
	s := sched.New(sched.Config{MaxNumSeqs: 64, MaxNumBatchedTokens: 512, MaxModelLen: 1024, EOSTokenIDs: []int32{2}}, pool)
	ex, err := simexec.New(simexec.Config{VocabSize: 1000, TokenMin: 10, TokenMax: 999, EOSTokenIDs: []int32{2}, StepTime: 100 * time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	tr := newFake()
	return run(t, Options{EngineID: "e1", Sched: s, Exec: ex, Transport: tr, DrainTimeout: drain})
}

// run starts a loop with opts (its Transport a *fakeTransport) and stops
// it when the test ends.
func run(t *testing.T, opts Options) *setup {
	t.Helper()
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	st := &setup{tr: opts.Transport.(*fakeTransport), cancel: cancel, done: make(chan error, 1)}
	go func() { st.done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-st.done:
		case <-time.After(10 * time.Second):
			t.Error("Run did not return")
		}
	})
	return st
}

func add(fe, id string, prompt, maxTokens int) zmqtransport.Inbound {
	req := &ipc.AddRequest{RequestID: id, PromptTokenIDs: make([]int32, prompt)}
	for i := range req.PromptTokenIDs {
		req.PromptTokenIDs[i] = int32(10 + (i*7+len(id))%900)
	}
	req.Params.MaxTokens = int32(maxTokens)
	req.Params.IgnoreEOS = true
	req.Params.Logprobs = -1
	return zmqtransport.Inbound{Frontend: fe, Kind: ipc.KindAdd, Add: req}
}

func TestRequestsComplete(t *testing.T) {
	st := start(t, 512, time.Second)
	const n, maxTok = 100, 20
	for i := range n {
		fe := []string{"fa", "fb"}[i%2]
		st.tr.in <- add(fe, fmt.Sprintf("%s-%d", fe, i), 5+i%40, maxTok)
	}
	// An invalid request is answered at once with an error.
	st.tr.in <- add("fa", "toolong", 2000, 1)
	done := func(fe string, want int) func() bool {
		return func() bool {
			k := 0
			for _, v := range st.tr.view(fe) {
				if v.finish != ipc.FinishNone {
					k++
				}
			}
			return k == want
		}
	}
	st.tr.waitFor(t, "fa's requests", done("fa", n/2+1))
	st.tr.waitFor(t, "fb's requests", done("fb", n/2))
	for _, fe := range []string{"fa", "fb"} {
		for id, v := range st.tr.view(fe) {
			if id == "toolong" {
				if v.finish != ipc.FinishError || v.errMsg == "" {
					t.Errorf("toolong: finish %v error %q", v.finish, v.errMsg)
				}
				continue
			}
			if id[:2] != fe {
				t.Errorf("%s got %s's output", fe, id)
			}
			if len(v.tokens) != maxTok || v.finish != ipc.FinishLength || v.after != 0 || v.outputs != maxTok {
				t.Errorf("%s: %d tokens in %d outputs, finish %v, %d after finish", id, len(v.tokens), v.outputs, v.finish, v.after)
			}
		}
	}
	s := st.tr.stats(t)
	if s.Running != 0 || s.Waiting != 0 || s.KVUsage != 0 || s.GeneratedTokens != n*maxTok {
		t.Errorf("stats after completion: %+v", s)
	}
}

func TestAbortAndFrontendGone(t *testing.T) {
	st := start(t, 512, time.Second)
	for i := range 10 {
		st.tr.in <- add("fa", fmt.Sprintf("a%d", i), 30, 1000)
		st.tr.in <- add("fb", fmt.Sprintf("b%d", i), 30, 1000)
	}
	st.tr.waitFor(t, "first tokens", func() bool { return len(st.tr.view("fa")) == 10 && len(st.tr.view("fb")) == 10 })
	// fa aborts half of its requests (and, harmlessly, one of fb's and an
	// unknown one); fb goes away.
	st.tr.in <- zmqtransport.Inbound{Frontend: "fa", Kind: ipc.KindAbort, Abort: &ipc.Abort{RequestIDs: []string{"a0", "a1", "a2", "a3", "a4", "b0", "nosuch"}}}
	st.tr.in <- zmqtransport.Inbound{Frontend: "fb", Kind: zmqtransport.KindFrontendGone}
	st.tr.waitFor(t, "aborts applied", func() bool {
		s := st.tr.stats(t)
		return s.Running == 5 && s.Waiting == 0
	})
	// The others continue (wait until each has grown, rather than sleep
	// and hope the loop ran meanwhile); the aborted ones got no more
	// tokens in those steps.
	before := st.tr.view("fa")
	var after map[string]*reqView
	st.tr.waitFor(t, "the requests not aborted to grow", func() bool {
		after = st.tr.view("fa")
		for i := 5; i < 10; i++ {
			id := fmt.Sprintf("a%d", i)
			if len(after[id].tokens) <= len(before[id].tokens) {
				return false
			}
		}
		return true
	})
	for i := range 5 {
		id := fmt.Sprintf("a%d", i)
		if len(after[id].tokens) != len(before[id].tokens) {
			t.Errorf("%s (aborted): tokens %d → %d", id, len(before[id].tokens), len(after[id].tokens))
		}
	}
	// Aborting the rest frees every block.
	st.tr.in <- zmqtransport.Inbound{Frontend: "fa", Kind: ipc.KindAbort, Abort: &ipc.Abort{RequestIDs: []string{"a5", "a6", "a7", "a8", "a9"}}}
	st.tr.waitFor(t, "all aborted", func() bool {
		s := st.tr.stats(t)
		return s.Running == 0 && s.KVUsage == 0
	})
	// The idle engine still tells fa that nothing runs any more: its last
	// batch (empty if need be) carries the current stats.
	st.tr.waitFor(t, "stats pushed after the aborts", func() bool {
		st.tr.mu.Lock()
		defer st.tr.mu.Unlock()
		batches := st.tr.outs["fa"]
		last := batches[len(batches)-1]
		return last.Stats != nil && last.Stats.Running == 0 && last.Stats.KVUsage == 0
	})
}

func TestUtility(t *testing.T) {
	st := start(t, 64, time.Second)
	st.tr.in <- add("fa", "x", 40, 2)
	st.tr.waitFor(t, "x", func() bool { v := st.tr.view("fa")["x"]; return v != nil && v.finish != ipc.FinishNone })
	st.tr.in <- zmqtransport.Inbound{Frontend: "fa", Kind: ipc.KindUtility, Utility: &ipc.Utility{CallID: 7, Method: MethodResetPrefixCache}}
	r := <-st.tr.utils
	var res map[string]int
	if err := msgpack.Unmarshal(r.Result, &res); err != nil || r.CallID != 7 || res["dropped_blocks"] != 2 {
		t.Fatalf("reset_prefix_cache: %+v %v %v", r, res, err)
	}
	st.tr.in <- zmqtransport.Inbound{Frontend: "fa", Kind: ipc.KindUtility, Utility: &ipc.Utility{CallID: 8, Method: "nope"}}
	if r := <-st.tr.utils; r.Error == "" || r.CallID != 8 {
		t.Fatalf("unknown method answered %+v", r)
	}
}

func TestShutdownDrains(t *testing.T) {
	st := start(t, 512, 5*time.Second)
	for i := range 5 {
		st.tr.in <- add("fa", fmt.Sprintf("r%d", i), 10, 50)
	}
	st.tr.waitFor(t, "first tokens", func() bool { return len(st.tr.view("fa")) == 5 })
	st.cancel()
	if err := <-st.done; err != nil {
		t.Fatal(err)
	}
	st.done <- nil // for Cleanup
	if reason := <-st.tr.closed; reason == "" {
		t.Fatal("closed without a reason")
	}
	for id, v := range st.tr.view("fa") {
		if v.finish != ipc.FinishLength || len(v.tokens) != 50 {
			t.Errorf("%s: finish %v after %d tokens; drain should let it finish", id, v.finish, len(v.tokens))
		}
	}
}

func TestShutdownTimeoutAborts(t *testing.T) {
	st := start(t, 512, time.Millisecond)
	st.tr.in <- add("fa", "long", 10, 1000)
	st.tr.waitFor(t, "first token", func() bool { return len(st.tr.view("fa")) == 1 })
	st.cancel()
	<-st.done
	st.done <- nil
	<-st.tr.closed
	v := st.tr.view("fa")["long"]
	if v.finish != ipc.FinishAbort || len(v.tokens) >= 1000 {
		t.Fatalf("finish %v after %d tokens, want abort", v.finish, len(v.tokens))
	}
}
