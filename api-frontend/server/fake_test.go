package server

import (
	"errors"
	"sync"
	"time"

	"github.com/sluice-llm/sluice/api-frontend/engineclient"
	"github.com/sluice-llm/sluice/ipc"
)

// byteTok is a byte-level tokenizer for tests: id b < 256 is byte b, 256 is
// the special EOS "</s>".
type byteTok struct{}

const eosID = 256

func (byteTok) Encode(text string, addSpecial bool) []int32 {
	ids := make([]int32, len(text))
	for i := 0; i < len(text); i++ {
		ids[i] = int32(text[i])
	}
	return ids
}

func (byteTok) Decode(ids []int32, skipSpecial bool) string {
	var b []byte
	for _, id := range ids {
		if id == eosID {
			if !skipSpecial {
				b = append(b, "</s>"...)
			}
			continue
		}
		b = append(b, byte(id))
	}
	return string(b)
}

func (byteTok) TokenBytes(id int32) []byte {
	if id == eosID {
		return []byte("</s>")
	}
	return []byte{byte(id)}
}
func (byteTok) IsSpecial(id int32) bool { return id == eosID }
func (byteTok) VocabSize() int          { return 257 }
func (byteTok) BOS() int32              { return -1 }
func (byteTok) EOS() int32              { return eosID }
func (byteTok) TokenID(tok string) (int32, bool) {
	if tok == "</s>" {
		return eosID, true
	}
	if len(tok) == 1 {
		return int32(tok[0]), true
	}
	return -1, false
}

// fakeEngine is an engine at the process edge: it accepts ADD/ABORT and
// produces one token per request per step from script (cycled), finishing
// at max_tokens, or with EOS when the script is exhausted and eos is set.
type fakeEngine struct {
	mu      sync.Mutex
	up      bool
	ready   ipc.Ready
	script  string
	eos     bool
	step    time.Duration
	reqs    map[string]*fakeReq
	order   []string
	aborted []string
	added   []*ipc.AddRequest
	outputs chan *ipc.Outputs
	events  chan engineclient.Event
	quit    chan struct{}
	kick    chan struct{} // an ADD reached an idle engine: its first step starts now
	stepN   uint64
	failAt  int // fail requests (FinishError) after this many tokens (0: never)
}

type fakeReq struct {
	req *ipc.AddRequest
	n   int
}

func newFakeEngine(script string, step time.Duration) *fakeEngine {
	e := &fakeEngine{
		up:      true,
		ready:   ipc.Ready{EngineID: "fake", ModelName: "m", MaxModelLen: 256, VocabSize: 257, EOSTokenIDs: []int32{eosID}},
		script:  script,
		step:    step,
		reqs:    make(map[string]*fakeReq),
		outputs: make(chan *ipc.Outputs, 64),
		events:  make(chan engineclient.Event, 16),
		quit:    make(chan struct{}),
		kick:    make(chan struct{}, 1),
	}
	go e.loop()
	return e
}

func (e *fakeEngine) Send(kind ipc.Kind, msg any) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.up {
		return errors.New("engine not ready")
	}
	switch kind {
	case ipc.KindAdd:
		r := msg.(*ipc.AddRequest)
		if len(e.reqs) == 0 {
			select { // steps start when work arrives, as a real engine's do
			case e.kick <- struct{}{}:
			default:
			}
		}
		e.added = append(e.added, r)
		e.reqs[r.RequestID] = &fakeReq{req: r}
		e.order = append(e.order, r.RequestID)
	case ipc.KindAbort:
		for _, id := range msg.(*ipc.Abort).RequestIDs {
			if _, ok := e.reqs[id]; ok {
				delete(e.reqs, id)
			}
			e.aborted = append(e.aborted, id)
		}
	}
	return nil
}

func (e *fakeEngine) loop() {
	t := time.NewTicker(e.step)
	defer t.Stop()
	defer close(e.outputs)
	for {
		select {
		case <-e.quit:
			return
		case <-e.kick:
			t.Reset(e.step) // the first output comes one whole step after the ADD
			continue
		case <-t.C:
		}
		e.mu.Lock()
		if !e.up || len(e.reqs) == 0 {
			e.mu.Unlock()
			continue
		}
		e.stepN++
		b := &ipc.Outputs{EngineID: "fake", Step: e.stepN, Stats: &ipc.SchedulerStats{Running: int32(len(e.reqs))}}
		var keep []string
		for _, id := range e.order {
			fr, ok := e.reqs[id]
			if !ok {
				continue
			}
			o := ipc.Output{RequestID: id, StopReason: -1}
			var tokID int32
			if e.eos && fr.n >= len(e.script) {
				tokID = eosID
				o.FinishReason = ipc.FinishStop
			} else {
				tokID = int32(e.script[fr.n%len(e.script)])
			}
			fr.n++
			o.NewTokenIDs = []int32{tokID}
			if fr.req.Params.Logprobs >= 0 {
				lp := ipc.TokenLogprobs{Logprob: -0.5, Rank: 1}
				for k := int32(0); k < fr.req.Params.Logprobs; k++ {
					lp.TopIDs = append(lp.TopIDs, tokID+k)
					lp.TopLogprobs = append(lp.TopLogprobs, -0.5-float32(k))
				}
				o.Logprobs = []ipc.TokenLogprobs{lp}
			}
			if o.FinishReason == ipc.FinishNone && fr.req.Params.MaxTokens > 0 && fr.n >= int(fr.req.Params.MaxTokens) {
				o.FinishReason = ipc.FinishLength
			}
			if o.FinishReason == ipc.FinishNone && e.failAt > 0 && fr.n >= e.failAt {
				o.FinishReason = ipc.FinishError
				o.Error = "simulated failure"
			}
			b.Outputs = append(b.Outputs, o)
			if o.FinishReason != ipc.FinishNone {
				delete(e.reqs, id)
			} else {
				keep = append(keep, id)
			}
		}
		e.order = keep
		e.mu.Unlock()
		select {
		case e.outputs <- b:
		case <-e.quit:
			return
		}
	}
}

// kill takes the engine down (its requests are lost).
func (e *fakeEngine) kill() {
	e.mu.Lock()
	e.up = false
	e.reqs = make(map[string]*fakeReq)
	e.order = nil
	e.mu.Unlock()
	e.events <- engineclient.Event{Up: false, Reason: "killed"}
}

func (e *fakeEngine) revive() {
	e.mu.Lock()
	e.up = true
	e.mu.Unlock()
	e.events <- engineclient.Event{Up: true, Ready: e.ready}
}

func (e *fakeEngine) abortedIDs() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.aborted...)
}

func (e *fakeEngine) active() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.reqs)
}

func (e *fakeEngine) Outputs() <-chan *ipc.Outputs      { return e.outputs }
func (e *fakeEngine) Events() <-chan engineclient.Event { return e.events }
func (e *fakeEngine) Ready() (ipc.Ready, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ready, e.up
}
func (e *fakeEngine) Close() { close(e.quit); close(e.events) }
func (e *fakeEngine) Call(string, []byte, time.Duration) (*ipc.UtilityResult, error) {
	return &ipc.UtilityResult{}, nil
}
