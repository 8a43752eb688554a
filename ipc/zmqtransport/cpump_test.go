package zmqtransport

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluice-llm/sluice/ipc"
)

// helperEngineEnv makes the test binary an engine for
// TestPumpReceiveMakesNoCgoCall (the cgo-call counter is per process).
const helperEngineEnv = "SLUICE_ZMQ_HELPER_ENGINE"

// TestHelperEngineProcess is not a test: run with helperEngineEnv set to an
// address, it serves an engine there that answers an ADD with 200 batches
// of 64 outputs, 1 ms apart, and a batch of step 999 last.
func TestHelperEngineProcess(t *testing.T) {
	addr := os.Getenv(helperEngineEnv)
	if addr == "" {
		t.Skip("helper process for TestPumpReceiveMakesNoCgoCall")
	}
	s := listen(t, addr)
	defer s.Close("helper done")
	deadline := time.After(60 * time.Second)
	for {
		select {
		case in := <-s.Inbound():
			if in.Kind != ipc.KindAdd {
				continue
			}
			outs := make([]ipc.Output, 64)
			for i := range outs {
				outs[i] = ipc.Output{RequestID: fmt.Sprintf("%s-%d", in.Add.RequestID, i), NewTokenIDs: []int32{int32(i)}}
			}
			for step := 0; step < 200; step++ {
				s.SendOutputs(in.Frontend, &ipc.Outputs{EngineID: "e1", Step: uint64(step), Outputs: outs})
				time.Sleep(time.Millisecond)
			}
			s.SendOutputs(in.Frontend, &ipc.Outputs{EngineID: "e1", Step: 999})
		case <-deadline:
			return
		}
	}
}

// TestPumpReceiveMakesNoCgoCall: with the engine in another process,
// receiving batches, answering pings and sending requests make no cgo call
// in the frontend: the pump thread does the zmq calls. (A cgo call from Go
// after an idle spell wakes the runtime's sysmon into 20 µs polling.)
func TestPumpReceiveMakesNoCgoCall(t *testing.T) {
	if os.Getenv(helperEngineEnv) != "" {
		t.Skip("inside the helper")
	}
	addr := ipcAddr(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperEngineProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEngineEnv+"="+addr)
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	c := dial(t, addr, "fe-cgo")
	defer c.Close()
	waitUp(t, c)
	time.Sleep(300 * time.Millisecond) // pings go both ways meanwhile
	before := runtime.NumCgoCall()
	if err := c.Send(ipc.KindAdd, &ipc.AddRequest{RequestID: "go"}); err != nil {
		t.Fatal(err)
	}
	batches, outputs := 0, 0
	timeout := time.After(20 * time.Second)
	for done := false; !done; {
		select {
		case o := <-c.Outputs():
			if o.Step == 999 {
				done = true
				break
			}
			if o.Step != uint64(batches) {
				t.Fatalf("batch %d has step %d", batches, o.Step)
			}
			batches++
			outputs += len(o.Outputs)
			if err := c.Send(ipc.KindAbort, &ipc.Abort{RequestIDs: []string{"x"}}); err != nil {
				t.Fatal(err)
			}
			c.Recycle(o)
		case <-timeout:
			t.Fatalf("%d batches within 20 s; helper said:\n%s", batches, stderr.String())
		}
	}
	calls := runtime.NumCgoCall() - before
	if batches != 200 || outputs != 200*64 {
		t.Fatalf("%d batches, %d outputs; want 200, %d", batches, outputs, 200*64)
	}
	if calls != 0 {
		t.Fatalf("%d cgo calls while receiving 200 batches and sending 201 requests; want 0", calls)
	}
}

// TestPumpBackpressure: when Go stops taking batches, the pump's slots fill
// and it stops reading the socket (zmq queues the rest); once Go takes them
// again, every batch arrives, in order.
func TestPumpBackpressure(t *testing.T) {
	addr := ipcAddr(t)
	s := listen(t, addr)
	defer s.Close("test over")
	c, err := Dial(cfgT(ClientConfig{Addr: addr, FrontendID: "fe-bp", ModelName: "m", OutputsBuffer: 8}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitUp(t, c)
	const n = 5000 // far more than the Outputs buffer and the pump's slots
	for i := 0; i < n; i++ {
		s.SendOutputs("fe-bp", &ipc.Outputs{EngineID: "e1", Step: uint64(i)})
	}
	time.Sleep(500 * time.Millisecond) // let the slots fill
	for i := 0; i < n; i++ {
		select {
		case o := <-c.Outputs():
			if o.Step != uint64(i) {
				t.Fatalf("batch %d has step %d", i, o.Step)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("batch %d of %d not delivered", i, n)
		}
	}
}

// TestPumpSendRing: frames of every size reach the engine whole and in
// order while the Go → C ring wraps many times, including frames too large
// for the ring, which travel in C memory of their own.
//
// The liveness limits are far longer than the other tests': under -race on
// a loaded machine, 120 frames of up to 2.4 MB can keep both sides busy past
// 500 ms, and a frontend dropped as silent would lose frames, which is not
// what this test is about.
func TestPumpSendRing(t *testing.T) {
	addr := ipcAddr(t)
	s, err := Listen(EngineConfig{Addr: addr, Ready: ipc.Ready{EngineID: "e1", ModelName: "m", MaxModelLen: 128, PID: os.Getpid()},
		PingInterval: 100 * time.Millisecond, LivenessTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close("test over")
	c, err := Dial(cfgT(ClientConfig{Addr: addr, FrontendID: "fe-ring", ModelName: "m", PingInterval: 100 * time.Millisecond, LivenessTimeout: 30 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitUp(t, c)
	sizes := []int{0, 1, 7, 8, 9, 100, 4000, 70000, 300000}
	var want []int
	for i := 0; i < 120; i++ {
		want = append(want, sizes[i%len(sizes)])
	}
	want = append(want, defaultOutCap/4/8+1, defaultOutCap/8) // pointer records (ids are 8 bytes)
	sendErr := make(chan error, 1)                            // the sender must not call t after the test ends
	go func() {
		for i, n := range want {
			ids := make([]string, n)
			for j := range ids {
				ids[j] = fmt.Sprintf("%07d", i) // 7 characters and a msgpack header: 8 bytes
			}
			if err := c.Send(ipc.KindAbort, &ipc.Abort{RequestIDs: ids}); err != nil {
				sendErr <- fmt.Errorf("send message %d: %w", i, err)
				return
			}
		}
	}()
	for i, n := range want {
		select {
		case in := <-s.Inbound():
			if in.Kind != ipc.KindAbort || in.Abort == nil {
				t.Fatalf("message %d: kind %d, want ABORT with %d ids", i, in.Kind, n)
			}
			if len(in.Abort.RequestIDs) != n {
				t.Fatalf("message %d: ABORT with %d ids, want %d", i, len(in.Abort.RequestIDs), n)
			}
			for _, id := range in.Abort.RequestIDs {
				if id != fmt.Sprintf("%07d", i) {
					t.Fatalf("message %d carries id %q", i, id)
				}
			}
		case err := <-sendErr:
			t.Fatal(err)
		case <-time.After(20 * time.Second):
			t.Fatalf("message %d of %d not received", i, len(want))
		}
	}
}

// TestPumpCloseReleasesEverything: Close ends the pump thread's goroutines
// and closes every descriptor it opened, with frames still queued both ways.
func TestPumpCloseReleasesEverything(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	addr := ipcAddr(t)
	s := listen(t, addr)
	defer s.Close("test over")
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("no /proc/self/fd to count descriptors")
	}
	c0 := dial(t, addr, "fe-warm") // the first socket of a process opens lasting descriptors
	waitUp(t, c0)
	c0.Close()
	before := countFds(t)
	for round := 0; round < 5; round++ {
		id := fmt.Sprintf("fe-close-%d", round)
		c := dial(t, addr, id)
		waitUp(t, c)
		for i := 0; i < 200; i++ {
			s.SendOutputs(id, &ipc.Outputs{EngineID: "e1", Step: uint64(i)})
			_ = c.Send(ipc.KindAbort, &ipc.Abort{RequestIDs: []string{"x"}})
		}
		c.Close()
		if _, ok := <-c.Outputs(); ok {
			for range c.Outputs() {
			}
		}
	}
	deadline := time.Now().Add(2 * time.Second)
	for countFds(t) > before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := countFds(t); n > before {
		t.Fatalf("%d descriptors after 5 dial/close rounds, %d before", n, before)
	}
}
