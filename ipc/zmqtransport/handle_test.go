package zmqtransport

import (
	"testing"
	"time"

	"github.com/sluice-llm/sluice/ipc"
)

// TestHandleOutputs: with a handler set, every batch reaches it on the I/O
// goroutine, in order, and none goes to Outputs; Backlog reports the frames
// waiting behind a slow handler; Close ends the connection while a handler
// is set.
func TestHandleOutputs(t *testing.T) {
	addr := ipcAddr(t)
	s := listen(t, addr)
	defer s.Close("test over")
	c := dial(t, addr, "fe-handle")
	waitUp(t, c)
	const steps = 200
	got := make(chan uint64, steps)
	release := make(chan struct{})
	backlog := make(chan bool, 1)
	c.HandleOutputs(func(b *ipc.Outputs) {
		if b.Step == 0 {
			<-release // hold the first batch until the rest wait in the pump
			backlog <- c.Backlog()
		}
		got <- b.Step
		c.Recycle(b)
	})
	for i := 0; i < steps; i++ {
		s.SendOutputs("fe-handle", &ipc.Outputs{EngineID: "e1", Step: uint64(i), Outputs: []ipc.Output{{RequestID: "r", NewTokenIDs: []int32{int32(i)}}}})
	}
	deadline := time.Now().Add(5 * time.Second)
	for !c.pump.backlog() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	close(release)
	if !<-backlog {
		t.Error("Backlog false while 199 batches waited behind the handler")
	}
	for i := 0; i < steps; i++ {
		select {
		case step := <-got:
			if step != uint64(i) {
				t.Fatalf("batch %d handled in place %d", step, i)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("batch %d not handled within 5s", i)
		}
	}
	if c.Backlog() {
		t.Error("Backlog true with nothing waiting")
	}
	select {
	case b := <-c.Outputs():
		t.Fatalf("batch %d went to Outputs with a handler set", b.Step)
	default:
	}
	c.Close()
	if _, ok := <-c.Outputs(); ok {
		t.Fatal("Outputs not closed after Close")
	}
}
