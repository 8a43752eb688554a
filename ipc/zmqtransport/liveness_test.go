package zmqtransport

import (
	"os"
	"testing"
	"time"

	"github.com/sluice-llm/sluice/ipc"
)

// TestBusyConsumerKeepsHeartbeat: a frontend whose Outputs consumer stalls
// for three engine liveness periods (a request with costly per-token work)
// still pings the engine, so the engine does not drop it as silent, the
// connection stays up, and every output arrives once the consumer reads
// again (issue 21: one request used to fail every stream of its frontend).
func TestBusyConsumerKeepsHeartbeat(t *testing.T) {
	addr := ipcAddr(t)
	s, err := Listen(EngineConfig{Addr: addr, Ready: ipc.Ready{EngineID: "e1", ModelName: "m", MaxModelLen: 128, PID: os.Getpid()},
		PingInterval: 100 * time.Millisecond, LivenessTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close("test over")
	c, err := Dial(cfgT(ClientConfig{Addr: addr, FrontendID: "fe-busy", ModelName: "m", PingInterval: 100 * time.Millisecond,
		LivenessTimeout: 500 * time.Millisecond, OutputsBuffer: 2}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitUp(t, c)
	const steps = 50
	gone := make(chan string, 1)
	go func() {
		for in := range s.Inbound() {
			switch in.Kind {
			case ipc.KindAdd:
				for i := 0; i < steps; i++ {
					s.SendOutputs(in.Frontend, &ipc.Outputs{EngineID: "e1", Step: uint64(i), Outputs: []ipc.Output{{RequestID: in.Add.RequestID, NewTokenIDs: []int32{int32(i)}}}})
				}
			case KindFrontendGone:
				select {
				case gone <- in.Frontend:
				default:
				}
			}
		}
	}()
	if err := c.Send(ipc.KindAdd, &ipc.AddRequest{RequestID: "r"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // the consumer is busy elsewhere
	select {
	case id := <-gone:
		t.Fatalf("engine dropped frontend %s while its consumer was busy", id)
	default:
	}
	if _, ok := c.Ready(); !ok {
		t.Fatal("connection went down while the consumer was busy")
	}
	got := 0
	timeout := time.After(5 * time.Second)
	for got < steps {
		select {
		case o := <-c.Outputs():
			got += len(o.Outputs)
		case <-timeout:
			t.Fatalf("%d of %d outputs", got, steps)
		}
	}
	select {
	case id := <-gone:
		t.Fatalf("engine dropped frontend %s", id)
	case ev := <-c.Events():
		if !ev.Up {
			t.Fatalf("connection went down: %s", ev.Reason)
		}
	default:
	}
}
