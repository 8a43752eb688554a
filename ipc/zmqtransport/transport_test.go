package zmqtransport

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	zmq "github.com/pebbe/zmq4"

	"github.com/sluice-llm/sluice/ipc"
)

func ipcAddr(t *testing.T) string {
	return "ipc://" + filepath.Join(t.TempDir(), "run", "engine.sock")
}

func waitUp(t *testing.T, c *EngineConn) ipc.Ready {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if r, ok := c.Ready(); ok {
			return r
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("engine not ready within 5s")
	return ipc.Ready{}
}

func listen(t *testing.T, addr string) *EngineSocket {
	t.Helper()
	s, err := Listen(EngineConfig{Addr: addr, Ready: ipc.Ready{EngineID: "e1", ModelName: "m", MaxModelLen: 128, PID: os.Getpid()},
		PingInterval: 100 * time.Millisecond, LivenessTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func dial(t *testing.T, addr, id string) *EngineConn {
	t.Helper()
	c, err := Dial(cfgT(ClientConfig{Addr: addr, FrontendID: id, ModelName: "m", PingInterval: 100 * time.Millisecond, LivenessTimeout: 500 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// echoEngine answers every ADD with one output per step, routed to the
// frontend that sent it.
func echoEngine(s *EngineSocket, steps int) {
	for in := range s.Inbound() {
		if in.Kind != ipc.KindAdd {
			continue
		}
		for i := 0; i < steps; i++ {
			fin := ipc.FinishNone
			if i == steps-1 {
				fin = ipc.FinishLength
			}
			s.SendOutputs(in.Frontend, &ipc.Outputs{EngineID: "e1", Step: uint64(i), Outputs: []ipc.Output{{RequestID: in.Add.RequestID, NewTokenIDs: []int32{int32(i)}, FinishReason: fin}}})
		}
	}
}

func TestTwoFrontendsOwnOutputs(t *testing.T) {
	for _, addr := range []string{ipcAddr(t), "tcp://127.0.0.1:0"} {
		if addr == "tcp://127.0.0.1:0" {
			addr = fmt.Sprintf("tcp://127.0.0.1:%d", freePort(t))
		}
		t.Run(addr[:3], func(t *testing.T) {
			s := listen(t, addr)
			defer s.Close("test over")
			go echoEngine(s, 5)
			if path, ok := cutIPC(addr); ok {
				st, err := os.Stat(path)
				if err != nil || st.Mode().Perm() != 0o600 {
					t.Fatalf("ipc socket mode: %v %v", st.Mode(), err)
				}
				dst, _ := os.Stat(filepath.Dir(path))
				if dst.Mode().Perm() != 0o700 {
					t.Fatalf("ipc dir mode %v", dst.Mode())
				}
			}
			a, b := dial(t, addr, "fe-a"), dial(t, addr, "fe-b")
			defer a.Close()
			defer b.Close()
			waitUp(t, a)
			waitUp(t, b)
			for i := 0; i < 10; i++ {
				if err := a.Send(ipc.KindAdd, &ipc.AddRequest{RequestID: fmt.Sprintf("a-%d", i)}); err != nil {
					t.Fatal(err)
				}
				if err := b.Send(ipc.KindAdd, &ipc.AddRequest{RequestID: fmt.Sprintf("b-%d", i)}); err != nil {
					t.Fatal(err)
				}
			}
			for _, c := range []struct {
				conn   *EngineConn
				prefix byte
			}{{a, 'a'}, {b, 'b'}} {
				got := 0
				timeout := time.After(5 * time.Second)
				for got < 50 {
					select {
					case o := <-c.conn.Outputs():
						for _, out := range o.Outputs {
							if out.RequestID[0] != c.prefix {
								t.Fatalf("frontend %c got %s", c.prefix, out.RequestID)
							}
							got++
						}
					case <-timeout:
						t.Fatalf("frontend %c: %d of 50 outputs", c.prefix, got)
					}
				}
			}
		})
	}
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func cutIPC(addr string) (string, bool) {
	if len(addr) > 6 && addr[:6] == "ipc://" {
		return addr[6:], true
	}
	return "", false
}

func TestSilentFrontendDropped(t *testing.T) {
	addr := ipcAddr(t)
	s := listen(t, addr)
	defer s.Close("test over")
	c := dial(t, addr, "fe-gone")
	waitUp(t, c)
	if err := c.Send(ipc.KindAdd, &ipc.AddRequest{RequestID: "r1"}); err != nil {
		t.Fatal(err)
	}
	in := <-s.Inbound()
	if in.Kind != ipc.KindAdd {
		t.Fatalf("got %v", in.Kind)
	}
	c.Close() // no goodbye: like a killed process
	start := time.Now()
	select {
	case in := <-s.Inbound():
		if in.Kind != KindFrontendGone || in.Frontend != "fe-gone" {
			t.Fatalf("got %+v", in)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("gone after %s", d)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("silent frontend not dropped")
	}
}

func TestEngineShutdownAndReturn(t *testing.T) {
	addr := ipcAddr(t)
	s := listen(t, addr)
	c := dial(t, addr, "fe-1")
	defer c.Close()
	r1 := waitUp(t, c)
	s.Close("restart")
	deadline := time.Now().Add(2 * time.Second)
	for {
		if _, ok := c.Ready(); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("frontend still thinks the engine is up")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := c.Send(ipc.KindAdd, &ipc.AddRequest{RequestID: "x"}); err != ErrNotReady {
		t.Fatalf("send while down: %v", err)
	}
	s2, err := Listen(EngineConfig{Addr: addr, Ready: ipc.Ready{EngineID: "e2", ModelName: "m"}, PingInterval: 100 * time.Millisecond, LivenessTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close("test over")
	r2 := waitUp(t, c)
	if r1.EngineID == r2.EngineID {
		t.Fatalf("reconnected to the same engine id %s", r2.EngineID)
	}
}

// TestSilentEngine uses a raw ROUTER that answers HELLO once and then goes
// silent, like a SIGSTOPped or killed engine.
func TestSilentEngine(t *testing.T) {
	addr := ipcAddr(t)
	if err := prepareIPC(addr); err != nil {
		t.Fatal(err)
	}
	router, _ := zmq.NewSocket(zmq.ROUTER)
	defer router.Close()
	if err := router.Bind(addr); err != nil {
		t.Fatal(err)
	}
	c := dial(t, addr, "fe-1")
	defer c.Close()
	router.SetRcvtimeo(3 * time.Second)
	parts, err := router.RecvMessageBytes(0)
	if err != nil {
		t.Fatal(err)
	}
	codec := ipc.NewCodec()
	frame, _ := codec.Encode(ipc.KindReady, &ipc.Ready{ProtocolVersion: ipc.ProtocolVersion, EngineID: "raw"})
	router.SendMessage(parts[0], frame)
	waitUp(t, c)
	start := time.Now()
	for {
		if _, ok := c.Ready(); !ok {
			break
		}
		if time.Since(start) > 3*time.Second {
			t.Fatal("silent engine not detected")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if d := time.Since(start); d < 400*time.Millisecond {
		t.Fatalf("declared down too early: %s", d)
	}
}

func TestRejectsWrongModel(t *testing.T) {
	addr := ipcAddr(t)
	s := listen(t, addr)
	defer s.Close("test over")
	c, err := Dial(cfgT(ClientConfig{Addr: addr, FrontendID: "fe-x", ModelName: "other"}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	time.Sleep(500 * time.Millisecond)
	if _, ok := c.Ready(); ok {
		t.Fatal("frontend for another model accepted")
	}
}

// BenchmarkRouterDealer measures 1024-output batches per second from the
// engine's ROUTER to a frontend's DEALER over ipc://, encode and decode
// included; /recycle gives each batch back (Recycle) as the frontend does.
func BenchmarkRouterDealer(b *testing.B) {
	for _, recycle := range []bool{false, true} {
		name := "fresh"
		if recycle {
			name = "recycle"
		}
		b.Run(name, func(b *testing.B) { benchRouterDealer(b, recycle) })
	}
}

func benchRouterDealer(b *testing.B, recycle bool) {
	addr := "ipc://" + filepath.Join(b.TempDir(), "e.sock")
	s, err := Listen(EngineConfig{Addr: addr, Ready: ipc.Ready{EngineID: "e", ModelName: "m"}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close("done")
	c, err := Dial(cfgT(ClientConfig{Addr: addr, FrontendID: "fe", ModelName: "m", OutputsBuffer: 64}))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	for {
		if _, ok := c.Ready(); ok {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	batch := &ipc.Outputs{EngineID: "e"}
	for i := 0; i < 1024; i++ {
		batch.Outputs = append(batch.Outputs, ipc.Output{RequestID: fmt.Sprintf("cmpl-%032d", i), NewTokenIDs: []int32{int32(i)}, StopReason: -1})
	}
	b.ResetTimer()
	go func() {
		for i := 0; i < b.N; i++ {
			s.SendOutputs("fe", batch)
		}
	}()
	for i := 0; i < b.N; i++ {
		o := <-c.Outputs()
		if len(o.Outputs) != 1024 {
			b.Fatalf("batch of %d", len(o.Outputs))
		}
		if recycle {
			c.Recycle(o)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "batches/s")
}

// TestKilledEngineDetectedFast: a raw ROUTER that answers HELLO and then
// closes its socket (what a SIGKILLed engine's kernel does) is detected by
// the socket monitor well before the liveness timeout.
func TestKilledEngineDetectedFast(t *testing.T) {
	addr := ipcAddr(t)
	if err := prepareIPC(addr); err != nil {
		t.Fatal(err)
	}
	router, _ := zmq.NewSocket(zmq.ROUTER)
	router.SetLinger(0)
	if err := router.Bind(addr); err != nil {
		t.Fatal(err)
	}
	c, err := Dial(cfgT(ClientConfig{Addr: addr, FrontendID: "fe-1", LivenessTimeout: 30 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	router.SetRcvtimeo(3 * time.Second)
	parts, err := router.RecvMessageBytes(0)
	if err != nil {
		t.Fatal(err)
	}
	frame, _ := ipc.NewCodec().Encode(ipc.KindReady, &ipc.Ready{ProtocolVersion: ipc.ProtocolVersion, EngineID: "raw"})
	router.SendMessage(parts[0], frame)
	waitUp(t, c)
	start := time.Now()
	router.Close()
	for {
		if _, ok := c.Ready(); !ok {
			break
		}
		if time.Since(start) > 2*time.Second {
			t.Fatal("closed engine connection not detected within 2s (liveness is 30s here)")
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("detected after %s", time.Since(start))
}
