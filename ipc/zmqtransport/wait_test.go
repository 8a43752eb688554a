package zmqtransport

import (
	"bytes"
	"os"
	"runtime"
	"slices"
	"testing"
	"time"

	zmq "github.com/pebbe/zmq4"
	"go.uber.org/goleak"

	"github.com/sluice-llm/sluice/ipc"
)

// goroutineStates returns the state ("select", "syscall", "IO wait"…) of
// every goroutine whose stack contains fn.
func goroutineStates(fn string) []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var states []string
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		if !bytes.Contains(g, []byte(fn)) {
			continue
		}
		head, _, _ := bytes.Cut(g, []byte("\n"))
		_, st, _ := bytes.Cut(head, []byte("["))
		st, _, _ = bytes.Cut(st, []byte("]"))
		st, _, _ = bytes.Cut(st, []byte(",")) // "select, 2 minutes"
		if bytes.Contains(g, []byte("_Cfunc_")) {
			st = []byte("cgo")
		}
		states = append(states, string(st))
	}
	return states
}

// TestIdleIOLoopNotInCgo: between messages the I/O goroutines wait in a Go
// select (the engine's sockets' ZMQ_FDs, the frontend pump's pipe, in the
// network poller), not in a cgo zmq_poll, which would make sysmon wake every 20 µs; and everything they
// started is gone after Close.
func TestIdleIOLoopNotInCgo(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	addr := ipcAddr(t)
	s := listen(t, addr)
	c := dial(t, addr, "fe-idle")
	waitUp(t, c)
	const samples = 50
	inCgo := map[string]int{}
	for i := 0; i < samples; i++ {
		time.Sleep(4 * time.Millisecond)
		for _, fn := range []string{"(*EngineConn).ioLoop", "(*EngineSocket).ioLoop"} {
			states := goroutineStates(fn)
			if len(states) != 1 {
				t.Fatalf("%s: %d goroutines (%v), want 1", fn, len(states), states)
			}
			if states[0] == "cgo" || states[0] == "syscall" {
				inCgo[fn]++
			}
		}
		// the engine's router and inproc pull, and the frontend pump's
		// notify pipe
		waiters := goroutineStates("(*sockWaiter).run")
		if len(waiters) != 2 {
			t.Fatalf("%d sockWaiter goroutines (%v), want 2: a socket fell back to ticking", len(waiters), waiters)
		}
		pipes := goroutineStates("(*pipeWaiter).run")
		if want := map[bool]int{true: 1, false: 0}[testLibZMQ()]; len(pipes) != want {
			t.Fatalf("%d pipeWaiter goroutines (%v), want %d", len(pipes), pipes, want)
		}
		if !testLibZMQ() {
			pipes = goroutineStates("(*goPump).run") // its reader, in the poller
			if len(pipes) != 1 {
				t.Fatalf("%d goPump readers (%v), want 1", len(pipes), pipes)
			}
		}
		waiters = append(waiters, pipes...)
		for _, st := range waiters {
			if st != "IO wait" && st != "runnable" && st != "running" {
				t.Fatalf("waiting goroutine in state %q", st)
			}
		}
	}
	// Pings (every 100 ms here) and their answers take a few short cgo
	// calls; a loop parked in zmq_poll would be in cgo in every sample.
	for fn, n := range inCgo {
		if n > samples/5 {
			t.Errorf("%s in a cgo call in %d of %d samples", fn, n, samples)
		}
	}
	c.Close()
	s.Close("test over")
}

// TestDeliveryLatencyAfterIdle: a batch sent after the I/O goroutines went
// idle arrives at once (a lost ZMQ_FD edge would leave it waiting for the
// 50 ms housekeeping tick, or for ever).
func TestDeliveryLatencyAfterIdle(t *testing.T) {
	addr := ipcAddr(t)
	s := listen(t, addr)
	defer s.Close("test over")
	c := dial(t, addr, "fe-lat")
	defer c.Close()
	waitUp(t, c)
	var lat []time.Duration
	for i := 0; i < 40; i++ {
		time.Sleep(time.Duration(1+i%7) * time.Millisecond)
		start := time.Now()
		s.SendOutputs("fe-lat", &ipc.Outputs{EngineID: "e1", Step: uint64(i)})
		select {
		case o := <-c.Outputs():
			if o.Step != uint64(i) {
				t.Fatalf("step %d, want %d", o.Step, i)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("batch %d not delivered within 5s", i)
		}
		lat = append(lat, time.Since(start))
		// A request the other way between batches: sends on the dealer
		// consume ZMQ_FD edges, which the loop must not lose.
		if err := c.Send(ipc.KindAbort, &ipc.Abort{RequestIDs: []string{"x"}}); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(lat)
	t.Logf("latency p50 %s, max %s", lat[len(lat)/2], lat[len(lat)-1])
	if p50 := lat[len(lat)/2]; p50 > 10*time.Millisecond {
		t.Fatalf("median delivery latency %s: wake-ups are being lost", p50)
	}
}

// TestSockWaiterWakesOnMessage drives a sockWaiter directly: it signals
// when a message arrives on an idle PAIR socket, and Close releases it.
func TestSockWaiterWakesOnMessage(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx, err := zmq.NewContext()
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Term()
	a, _ := ctx.NewSocket(zmq.PAIR)
	b, _ := ctx.NewSocket(zmq.PAIR)
	defer a.Close()
	defer b.Close()
	a.SetLinger(0)
	b.SetLinger(0)
	if err := a.Bind("inproc://waiter-test"); err != nil {
		t.Fatal(err)
	}
	if err := b.Connect("inproc://waiter-test"); err != nil {
		t.Fatal(err)
	}
	w, err := newSockWaiter(a)
	if err != nil {
		t.Fatalf("ZMQ_FD not pollable: %v", err)
	}
	defer w.close()
	for i := 0; i < 20; i++ {
		for readable(a) { // what an owner does before each wait
			t.Fatalf("round %d: readable before anything was sent", i)
		}
		if _, err := b.Send("hi", 0); err != nil {
			t.Fatal(err)
		}
		deadline := time.After(5 * time.Second)
		for !readable(a) {
			select {
			case <-w.C:
			case <-deadline:
				t.Fatalf("round %d: no wake-up within 5s", i)
			}
		}
		if msg, err := a.Recv(zmq.DONTWAIT); err != nil || msg != "hi" {
			t.Fatalf("round %d: recv %q %v", i, msg, err)
		}
	}
	if _, err := os.Stat("/proc/self/fd"); err == nil {
		before := countFds(t)
		w2, err := newSockWaiter(b)
		if err != nil {
			t.Fatal(err)
		}
		if n := countFds(t); n != before+1 {
			t.Fatalf("%d fds after starting a waiter, want %d", n, before+1)
		}
		w2.close()
		if n := countFds(t); n != before {
			t.Fatalf("%d fds after closing a waiter, want %d", n, before)
		}
	}
}

func countFds(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestRecycledBatchReused: a batch given back with Recycle is the memory
// the next batch is decoded into, with nothing of the old one left over.
func TestRecycledBatchReused(t *testing.T) {
	addr := ipcAddr(t)
	s := listen(t, addr)
	defer s.Close("test over")
	c := dial(t, addr, "fe-rec")
	defer c.Close()
	waitUp(t, c)
	recv := func() *ipc.Outputs {
		t.Helper()
		select {
		case o := <-c.Outputs():
			return o
		case <-time.After(5 * time.Second):
			t.Fatal("batch not delivered")
			return nil
		}
	}
	s.SendOutputs("fe-rec", &ipc.Outputs{EngineID: "e1", Step: 1, Stats: &ipc.SchedulerStats{Running: 3},
		Outputs: []ipc.Output{{RequestID: "a", NewTokenIDs: []int32{1, 2, 3}}, {RequestID: "b", NewTokenIDs: []int32{4}}}})
	first := recv()
	c.Recycle(first)
	s.SendOutputs("fe-rec", &ipc.Outputs{EngineID: "e1", Step: 2, Outputs: []ipc.Output{{RequestID: "c", NewTokenIDs: []int32{9}, FinishReason: ipc.FinishLength}}})
	second := recv()
	if second != first {
		t.Fatalf("second batch %p is not the recycled %p", second, first)
	}
	want := &ipc.Outputs{EngineID: "e1", Step: 2, Outputs: []ipc.Output{{RequestID: "c", NewTokenIDs: []int32{9}, FinishReason: ipc.FinishLength, StopReason: -1}}}
	if second.Step != want.Step || second.Stats != nil || len(second.Outputs) != 1 ||
		second.Outputs[0].RequestID != "c" || !slices.Equal(second.Outputs[0].NewTokenIDs, []int32{9}) ||
		second.Outputs[0].FinishReason != ipc.FinishLength {
		t.Fatalf("reused batch = %+v, want %+v", second, want)
	}
}
