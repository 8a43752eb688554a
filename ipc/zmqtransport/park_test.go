package zmqtransport

import (
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/sluice-llm/sluice/ipc"
)

// parked reports whether the engine has parked frontend id (test helper).
func (s *EngineSocket) parked(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.frontends[id]
	return ok && st.parked
}

// parkEngine listens with a short liveness limit (300 ms) and the given
// parking limits.
func parkEngine(t *testing.T, addr string, grace time.Duration, buf int) *EngineSocket {
	t.Helper()
	s, err := Listen(EngineConfig{Addr: addr, Ready: ipc.Ready{EngineID: "e1", ModelName: "m", MaxModelLen: 128, PID: os.Getpid()},
		PingInterval: 100 * time.Millisecond, LivenessTimeout: 300 * time.Millisecond, ParkGrace: grace, ParkBufferBytes: buf})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// tokenEngine answers every ADD with tokens 0..n-1, one output per 10 ms
// (the last one finishes the request). Like engine-core, it stops a
// frontend's requests when the socket drops that frontend, and reports the
// drop on gone.
func tokenEngine(s *EngineSocket, n int, gone chan<- string) {
	var mu sync.Mutex
	stops := map[string]chan struct{}{}
	for in := range s.Inbound() {
		switch in.Kind {
		case ipc.KindAdd:
			mu.Lock()
			stop, ok := stops[in.Frontend]
			if !ok {
				stop = make(chan struct{})
				stops[in.Frontend] = stop
			}
			mu.Unlock()
			go func(fe, id string) {
				for i := 0; i < n; i++ {
					select {
					case <-stop:
						return
					default:
					}
					o := ipc.Output{RequestID: id, NewTokenIDs: []int32{int32(i)}}
					if i == n-1 {
						o.FinishReason = ipc.FinishLength
					}
					s.SendOutputs(fe, &ipc.Outputs{EngineID: "e1", Step: uint64(i), Outputs: []ipc.Output{o}})
					time.Sleep(10 * time.Millisecond)
				}
			}(in.Frontend, in.Add.RequestID)
		case KindFrontendGone:
			mu.Lock()
			if stop, ok := stops[in.Frontend]; ok {
				close(stop)
				delete(stops, in.Frontend)
			}
			mu.Unlock()
			gone <- in.Frontend
		}
	}
}

// TestSilentFrontendParkedThenResumes: a frontend whose heartbeats stop for
// longer than the engine's liveness limit is parked, not dropped: its
// requests run on, their outputs are held, and when its heartbeats resume
// every stream completes with exactly its tokens, in order, once each; the
// frontend's connection never goes down (issue 21: a frozen frontend used
// to have every request failed).
func TestSilentFrontendParkedThenResumes(t *testing.T) {
	addr := ipcAddr(t)
	s := parkEngine(t, addr, 30*time.Second, 0)
	defer s.Close("test over")
	const n, streams = 150, 3 // 1.5 s of tokens per stream
	gone := make(chan string, 4)
	go tokenEngine(s, n, gone)
	c, err := Dial(cfgT(ClientConfig{Addr: addr, FrontendID: "fe-park", ModelName: "m", PingInterval: 100 * time.Millisecond, LivenessTimeout: 3 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitUp(t, c)
	for i := 0; i < streams; i++ {
		if err := c.Send(ipc.KindAdd, &ipc.AddRequest{RequestID: fmt.Sprintf("r%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string][]int32{}
	finished := 0
	take := func(o *ipc.Outputs) {
		for _, out := range o.Outputs {
			got[out.RequestID] = append(got[out.RequestID], out.NewTokenIDs...)
			if out.FinishReason != ipc.FinishNone {
				finished++
			}
		}
	}
	// Some tokens first, then freeze the heartbeats until the engine parks.
	select {
	case o := <-c.Outputs():
		take(o)
	case <-time.After(10 * time.Second):
		t.Fatal("no output")
	}
	c.muted.Store(true)
	deadline := time.Now().Add(10 * time.Second)
	for !s.parked("fe-park") {
		if time.Now().After(deadline) {
			t.Fatal("engine did not park the silent frontend within 10 s")
		}
		select {
		case o := <-c.Outputs():
			take(o)
		case <-time.After(10 * time.Millisecond):
		}
	}
	time.Sleep(500 * time.Millisecond) // outputs are held meanwhile
	c.muted.Store(false)
	timeout := time.After(20 * time.Second)
	for finished < streams {
		select {
		case o := <-c.Outputs():
			take(o)
		case id := <-gone:
			t.Fatalf("engine dropped frontend %s", id)
		case <-timeout:
			t.Fatalf("%d of %d streams finished", finished, streams)
		}
	}
	for i := 0; i < streams; i++ {
		id := fmt.Sprintf("r%d", i)
		toks := got[id]
		if len(toks) != n {
			t.Fatalf("%s: %d tokens, want %d", id, len(toks), n)
		}
		for j, tok := range toks {
			if tok != int32(j) {
				t.Fatalf("%s: token %d is %d", id, j, tok)
			}
		}
	}
	// Heartbeats flow again: nothing may go down afterwards either.
	settle := time.After(500 * time.Millisecond)
	for done := false; !done; {
		select {
		case ev := <-c.Events():
			if !ev.Up {
				t.Fatalf("frontend's connection went down: %s", ev.Reason)
			}
		case id := <-gone:
			t.Fatalf("engine dropped frontend %s", id)
		case <-settle:
			done = true
		}
	}
	if _, ok := c.Ready(); !ok {
		t.Fatal("frontend's connection is down")
	}
}

// TestParkedFrontendDropped: a parked frontend is dropped (its requests
// freed: KindFrontendGone) once the grace period ends, or at once when the
// outputs held for it pass the buffer limit.
func TestParkedFrontendDropped(t *testing.T) {
	for _, tc := range []struct {
		name  string
		grace time.Duration
		buf   int
		// within bounds the drop after the frontend falls silent.
		within time.Duration
	}{
		{"grace", 700 * time.Millisecond, 0, 5 * time.Second},
		{"buffer", time.Minute, 2048, 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := ipcAddr(t)
			s := parkEngine(t, addr, tc.grace, tc.buf)
			defer s.Close("test over")
			gone := make(chan string, 4)
			go tokenEngine(s, 2000, gone)
			id := "fe-drop-" + tc.name
			c, err := Dial(cfgT(ClientConfig{Addr: addr, FrontendID: id, ModelName: "m", PingInterval: 100 * time.Millisecond, LivenessTimeout: 30 * time.Second}))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			waitUp(t, c)
			if err := c.Send(ipc.KindAdd, &ipc.AddRequest{RequestID: "r"}); err != nil {
				t.Fatal(err)
			}
			c.muted.Store(true)
			start := time.Now()
			select {
			case fe := <-gone:
				if fe != id {
					t.Fatalf("dropped %q, want %q", fe, id)
				}
				if tc.name == "grace" && time.Since(start) < tc.grace {
					t.Fatalf("dropped after %s, before the %s grace period", time.Since(start), tc.grace)
				}
			case <-time.After(tc.within):
				t.Fatalf("parked frontend not dropped within %s", tc.within)
			}
			if s.parked(id) {
				t.Fatal("dropped frontend still parked")
			}
		})
	}
}

// session returns the session the engine has for frontend id (test helper).
func (s *EngineSocket) session(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.frontends[id]; ok {
		return st.session
	}
	return ""
}

// TestDownFrontendStartsNewSession: a frontend that went down (its
// consumer failed every request) says HELLO with a new session, so the
// engine aborts the requests it sent before (KindFrontendGone) instead of
// resuming orphans; the first HELLO's session is the one the engine keeps.
func TestDownFrontendStartsNewSession(t *testing.T) {
	addr := ipcAddr(t)
	s := listen(t, addr)
	defer s.Close("test over")
	c := dial(t, addr, "fe-session")
	defer c.Close()
	waitUp(t, c)
	first := s.session("fe-session")
	if first == "" {
		t.Fatal("engine holds no session for the frontend")
	}
	if err := c.Send(ipc.KindAdd, &ipc.AddRequest{RequestID: "r1"}); err != nil {
		t.Fatal(err)
	}
	if in := <-s.Inbound(); in.Kind != ipc.KindAdd {
		t.Fatalf("got kind %d, want ADD", in.Kind)
	}
	c.setDown("test: engine declared down")
	select {
	case in := <-s.Inbound():
		if in.Kind != KindFrontendGone || in.Frontend != "fe-session" {
			t.Fatalf("got kind %d from %q, want the frontend's requests aborted", in.Kind, in.Frontend)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("re-HELLO did not abort the old session's requests")
	}
	waitUp(t, c)
	if now := s.session("fe-session"); now == "" || now == first {
		t.Fatalf("session after re-HELLO %q, before %q; want a new one", now, first)
	}
}
