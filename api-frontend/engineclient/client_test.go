package engineclient

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sluice-llm/sluice/ipc"
)

// memConn is an in-memory EngineConn: the test double at the process edge
// (the e2e suites drive the client over real ZeroMQ).
type memConn struct {
	mu      sync.Mutex
	up      bool
	sent    []ipc.Kind
	aborts  []string
	outputs chan *ipc.Outputs
	events  chan Event
}

func newFake() *memConn {
	return &memConn{up: true, outputs: make(chan *ipc.Outputs, 8), events: make(chan Event, 8)}
}

func (f *memConn) Send(kind ipc.Kind, msg any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.up {
		return errors.New("down")
	}
	f.sent = append(f.sent, kind)
	if a, ok := msg.(*ipc.Abort); ok {
		f.aborts = append(f.aborts, a.RequestIDs...)
	}
	return nil
}
func (f *memConn) Outputs() <-chan *ipc.Outputs { return f.outputs }
func (f *memConn) Events() <-chan Event         { return f.events }
func (f *memConn) Ready() (ipc.Ready, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return ipc.Ready{MaxModelLen: 100}, f.up
}
func (f *memConn) Close() { close(f.outputs); close(f.events) }
func (f *memConn) Call(string, []byte, time.Duration) (*ipc.UtilityResult, error) {
	return &ipc.UtilityResult{Result: []byte{1}}, nil
}

type sink struct {
	mu     sync.Mutex
	outs   int
	failed string
	abort  bool
	done   chan struct{}
}

func newSink() *sink { return &sink{done: make(chan struct{}, 16)} }

func (s *sink) Output(o *ipc.Output, _ time.Time) bool {
	s.mu.Lock()
	s.outs++
	s.mu.Unlock()
	s.done <- struct{}{}
	return s.abort
}
func (s *sink) Fail(reason string) {
	s.mu.Lock()
	s.failed = reason
	s.mu.Unlock()
	s.done <- struct{}{}
}

func wait(t *testing.T, s *sink) {
	t.Helper()
	select {
	case <-s.done:
	case <-time.After(2 * time.Second):
		t.Fatal("sink not called")
	}
}

// eventually polls cond until it holds, failing the test after 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after 10 s waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestPickLeastLoadedAndFailOnlyOwnRequests(t *testing.T) {
	a, b := newFake(), newFake()
	c := New([]EngineConn{a, b}, Options{})
	c.Start()
	defer c.Close()
	// engine 0 reports a heavy load; new requests go to engine 1
	a.outputs <- &ipc.Outputs{Stats: &ipc.SchedulerStats{Running: 10, Waiting: 5}}
	// Pick prefers engine 0 on a tie, so engine 1 is picked once the
	// report has been read (its reader goroutine may run late).
	eventually(t, "engine 0's load report read", func() bool { e, err := c.Pick(); return err == nil && e == 1 })
	picks := map[int]int{}
	sinks := map[int][]*sink{}
	for i := 0; i < 12; i++ {
		e, err := c.Pick()
		if err != nil {
			t.Fatal(err)
		}
		s := newSink()
		if err := c.Add(e, &ipc.AddRequest{RequestID: "r" + string(rune('a'+i))}, s); err != nil {
			t.Fatal(err)
		}
		picks[e]++
		sinks[e] = append(sinks[e], s)
	}
	// 15 reported on engine 0: engine 1 takes requests until it is as loaded
	if picks[1] < 11 {
		t.Fatalf("picks %v: engine 1 should take most", picks)
	}
	// a stop-string abort from a sink unregisters and sends ABORT
	s0 := sinks[1][0]
	s0.abort = true
	b.outputs <- &ipc.Outputs{Outputs: []ipc.Output{{RequestID: "ra", NewTokenIDs: []int32{1}}}}
	wait(t, s0)
	// The ABORT goes out after the sink returns: wait for it, then check
	// it is the only one.
	eventually(t, "ABORT sent", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.aborts) > 0
	})
	b.mu.Lock()
	if len(b.aborts) != 1 || b.aborts[0] != "ra" {
		t.Fatalf("aborts %v", b.aborts)
	}
	b.mu.Unlock()
	// engine 0 goes down: only its requests fail
	a.mu.Lock()
	a.up = false
	a.mu.Unlock()
	a.events <- Event{Up: false, Reason: "gone"}
	for _, s := range sinks[0] {
		wait(t, s)
		if s.failed == "" {
			t.Fatal("engine 0 request not failed")
		}
	}
	for _, s := range sinks[1][1:] {
		if s.failed != "" {
			t.Fatal("engine 1 request failed")
		}
	}
	if e, _ := c.Pick(); e != 1 {
		t.Fatalf("picked down engine %d", e)
	}
	if got := c.InFlight(); got != len(sinks[1])-1 {
		t.Fatalf("in flight %d, want %d", got, len(sinks[1])-1)
	}
}

func TestAddFailsWhenDown(t *testing.T) {
	a := newFake()
	a.up = false
	c := New([]EngineConn{a}, Options{})
	c.Start()
	defer c.Close()
	if _, err := c.Pick(); !errors.Is(err, ErrNoEngine) {
		t.Fatalf("pick: %v", err)
	}
	if err := c.Add(0, &ipc.AddRequest{RequestID: "x"}, newSink()); err == nil || c.InFlight() != 0 {
		t.Fatalf("add to a down engine: %v, in flight %d", err, c.InFlight())
	}
}

// recyclingConn records the batches the client gives back.
type recyclingConn struct {
	*memConn
	recycled chan *ipc.Outputs
}

func (r *recyclingConn) Recycle(b *ipc.Outputs) { r.recycled <- b }

// TestRecycleAfterDispatch checks that a batch goes back to its transport
// only after its sinks have run, and never when it carries logprobs (whose
// top-k slices sinks keep).
func TestRecycleAfterDispatch(t *testing.T) {
	f := &recyclingConn{newFake(), make(chan *ipc.Outputs, 4)}
	c := New([]EngineConn{f}, Options{})
	c.Start()
	defer c.Close()
	s := newSink()
	if err := c.Add(0, &ipc.AddRequest{RequestID: "x"}, s); err != nil {
		t.Fatal(err)
	}
	plain := &ipc.Outputs{Outputs: []ipc.Output{{RequestID: "x", NewTokenIDs: []int32{1}}}}
	withLP := &ipc.Outputs{Outputs: []ipc.Output{{RequestID: "x", NewTokenIDs: []int32{2},
		Logprobs: []ipc.TokenLogprobs{{Logprob: -1, TopIDs: []int32{2}, TopLogprobs: []float32{-1}}}}}}
	for _, b := range []*ipc.Outputs{plain, withLP, plain} {
		f.outputs <- b
		wait(t, s)
	}
	for i := 0; i < 2; i++ {
		select {
		case b := <-f.recycled:
			if b != plain {
				t.Fatalf("recycled %p, want the batch without logprobs %p", b, plain)
			}
		case <-time.After(2 * time.Second):
			t.Fatal("batch not recycled")
		}
	}
	select {
	case b := <-f.recycled:
		t.Fatalf("unexpected recycle of %p", b)
	case <-time.After(50 * time.Millisecond):
	}
}
